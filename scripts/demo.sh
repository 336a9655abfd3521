#!/usr/bin/env bash
# Installs what is missing, builds fatpack, then: builds a sample package for several GPU
# architectures, inspects it, and prints which code a few GPUs (and future ones) would load and why.
# With a GPU and driver present it also runs the vector-add sample on it.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build=${FATPACK_BUILD_DIR:-build}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target fatpack
fatpack="$build/packager/fatpack"
out="$build/demo"
mkdir -p "$out"

echo "== fatpack build: SASS for sm_75, sm_80, sm_90 + PTX compute_80 (forward compatible) =="
"$fatpack" build -o "$out/demo.fpk" --arch 75-real,80,90-real samples/vector_add/vector_add.cu -- -O3
echo
echo "== fatpack inspect =="
"$fatpack" inspect "$out/demo.fpk"
echo
echo "== fatpack plan: an RTX 3090 (sm_86), an H200 (sm_90), a Blackwell (sm_120), on a CUDA 13.0 driver =="
"$fatpack" plan --gpu sm_86 --gpu sm_90 --gpu sm_120 --driver 13.0 "$out/demo.fpk"
echo
echo "== fatpack plan: every architecture, including future ones =="
"$fatpack" plan --driver 13.0 "$out/demo.fpk"

if [ -e /dev/nvidiactl ] || ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 >/dev/null 2>&1; then
  if cmake --build "$build" -j "$(nproc)" --target vector_add >/dev/null 2>&1; then
    echo
    echo "== a GPU driver is present: running samples/vector_add =="
    FATPACK_LOG=info "$build/samples/vector_add/vector_add" || echo "(the sample failed: see its message above)"
  fi
else
  echo
  echo "No GPU driver here: the sample run is skipped. On a GPU machine this demo also runs"
  echo "samples/vector_add, which loads the entry the plan above names for that GPU."
fi
