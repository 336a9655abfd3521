#!/usr/bin/env bash
# Installs what is missing, builds fatpack, then: builds a sample package for several GPU
# architectures, inspects it, and prints which code a few GPUs (and future ones) would load and why.
# With a GPU and driver present it also builds and runs the samples hello (which entry this GPU gets
# and why) and future_gpu (JIT from PTX on the first run, the cache on the second); samples/README.md.
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
"$fatpack" build -o "$out/demo.fpk" --arch 75-real,80,90-real samples/hello/vector_add.cu -- -O3
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
  cmake --build "$build" -j "$(nproc)" --target fatpack_sample_hello fatpack_sample_future_gpu
  echo
  echo "== a GPU driver is present: samples/hello (the package's choice for this GPU, and why) =="
  "$build/samples/hello/hello" || echo "(the sample failed: see its message above)"
  echo
  echo "== samples/future_gpu: no SASS for this GPU in its package: JIT from PTX, then the cache =="
  samples/future_gpu/run_twice.sh "$build/samples/future_gpu/future_gpu" || echo "(the sample failed: see its message above)"
else
  echo
  echo "No GPU driver here: the sample runs are skipped. On a GPU machine this demo also runs"
  echo "samples/hello, which loads the entry the plan above names for that GPU, and samples/future_gpu."
fi
