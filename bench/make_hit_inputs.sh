#!/usr/bin/env bash
# Inputs for fatpack_hit_bench: the mid source (40 distinct kernels, gen_kernels.py; NVRTC has no
# <cstdint>, so the include is dropped), its sm_XY cubin and compute_XY PTX (nvcc), and three
# packages: the cubin lz4, the cubin zstd, the PTX alone (so that the device must JIT it).
#   bench/make_hit_inputs.sh BUILD_DIR [ARCH=90] [WORK_DIR=BUILD_DIR/bench-hit]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
arch=${2:-90}
work=${3:-$build/bench-hit}
mkdir -p "$work" && cd "$work"
[ -f mid.cu ] || python3 "$here/gen_kernels.py" 40 0 | grep -v '#include' > mid.cu
[ -f mid.sm_$arch.cubin ] || nvcc -cubin -arch=sm_$arch -o mid.sm_$arch.cubin mid.cu
[ -f mid.compute_$arch.ptx ] || nvcc -ptx -arch=compute_$arch -o mid.compute_$arch.ptx mid.cu
fp="$build/packager/fatpack"
"$fp" pack -o sass-lz4.fpk --name hit-lz4 --module mid mid.sm_$arch.cubin
"$fp" pack -o sass-zstd.fpk --name hit-zstd --codec zstd --module mid mid.sm_$arch.cubin
"$fp" pack -o sass-none.fpk --name hit-none --codec none --module mid mid.sm_$arch.cubin
"$fp" pack -o ptx.fpk --name hit-ptx --module mid mid.compute_$arch.ptx
echo "$work"
