#!/usr/bin/env bash
# Inputs for fatpack_coldstart_bench: M modules (default 16) of 50 distinct kernels each (the
# "eight modules" shape: ~2.3 MB of PTX per module), compute_80 PTX only, in one package, so that a
# CC 9.0 GPU must JIT every module.
#   bench/make_coldstart_inputs.sh BUILD_DIR [MODULES] [WORK_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
modules=${2:-16}
work=${3:-$build/bench-coldstart}
mkdir -p "$work" && cd "$work"
ptx=()
for ((m = 0; m < modules; m++)); do
  [ -f part$m.cu ] || python3 "$here/gen_kernels.py" 50 $((m * 50)) > part$m.cu
  [ -f part$m.compute_80.ptx ] || nvcc -ptx -arch=compute_80 -o part$m.compute_80.ptx part$m.cu &
  ptx+=(part$m.compute_80.ptx)
  if (( (m + 1) % $(nproc) == 0 )); then wait; fi
done
wait
"$build/packager/fatpack" pack -o coldstart.fpk --name coldstart "${ptx[@]}"
"$build/packager/fatpack" inspect coldstart.fpk | head -3
