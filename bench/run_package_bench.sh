#!/usr/bin/env bash
# Package sizes and decompression speed on the 'mid' set (40 distinct kernels; five SASS
# images sm_75/80/86/89/90 + compute_90 PTX), against nvcc -Xfatbin -compress-all of the same images.
#   bench/run_package_bench.sh BUILD_DIR [WORK_DIR]
# Generates the inputs with bench/gen_kernels.py and nvcc (a few minutes on 2 cores; reused if present),
# packs them with each codec and runs fatpack_codec_bench. With a GPU, also run
#   BUILD_DIR/bench/fatpack_load_bench --cubin WORK/mid.sm_90.cubin --fatbin WORK/mid.compressed.fatbin WORK/mid.*.fpk
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
work=${2:-$build/bench-mid}
mkdir -p "$work" && cd "$work"
[ -f mid.cu ] || python3 "$here/gen_kernels.py" 40 > mid.cu
for sm in 75 80 86 89 90; do
  [ -f mid.sm_$sm.cubin ] || nvcc -cubin -arch=sm_$sm -o mid.sm_$sm.cubin mid.cu
done
[ -f mid.compute_90.ptx ] || nvcc -ptx -arch=compute_90 -o mid.compute_90.ptx mid.cu
if [ ! -f mid.compressed.fatbin ]; then
  gencode=()
  for sm in 75 80 86 89 90; do gencode+=(-gencode=arch=compute_$sm,code=sm_$sm); done
  nvcc -fatbin "${gencode[@]}" -gencode=arch=compute_90,code=compute_90 -Xfatbin -compress-all \
    -o mid.compressed.fatbin mid.cu
fi
inputs=(mid.sm_75.cubin mid.sm_80.cubin mid.sm_86.cubin mid.sm_89.cubin mid.sm_90.cubin mid.compute_90.ptx)
fp="$build/packager/fatpack"
for codec in lz4 zstd none; do
  /usr/bin/time -f "fatpack pack --codec $codec: %e s, %M KiB peak" "$fp" pack -o mid.$codec.fpk --codec $codec "${inputs[@]}"
done
"$fp" pack -o mid.zstd3.fpk --codec zstd --level 3 "${inputs[@]}"
"$fp" pack -o mid.zstd-wholeentry.fpk --codec zstd --block-size 4194304 "${inputs[@]}"
"$build/bench/fatpack_codec_bench" --nvcc-fatbin mid.compressed.fatbin \
  mid.lz4.fpk mid.zstd.fpk mid.zstd3.fpk mid.zstd-wholeentry.fpk mid.none.fpk
