#!/usr/bin/env bash
# Inputs of fatpack_suite (bench/run_suite.sh): generated with bench/gen_kernels.py, compiled with nvcc
# and packed with the build's `fatpack`, all HERE (the GPU machine has no nvcc). What the GPU run
# needs lands in OUT_DIR (31 MB at full size: the driver's PTX cases take the PTX out of the same
# packages, so both sides load the same images); sources, PTX and the other cubins stay in
# OUT_DIR.work (about 70 MB; reused by the next run).
#   bench/make_suite_inputs.sh BUILD_DIR OUT_DIR [--tiny]
# --tiny: a few kernels per set, for the CPU smoke test against the fake driver (seconds, not minutes).
# Sizes (full / tiny): mid 40 / 2 kernels, big 400 / 5 kernels in one module, many 16 / 2 modules of
# 50 / 2 kernels. Extra `fatpack pack` flags for the PTX packages: SUITE_PACK_FLAGS.
#
#   mid.sm_90.cubin            raw cubin (cuModuleLoadData case)
#   mid.fatbin                 nvcc -fatbin: SASS for every arch below + compute_90 PTX
#   mid.compressed.fatbin      the same with -Xfatbin -compress-all
#   mid.{lz4,zstd,none}.fpk    fatpack: the same SASS + PTX, one codec each (SASS cases)
#   mid.ptx.fpk                compute_90 PTX only (cold JIT, cache hits, N processes, kernel speed)
#   big.ptx.fpk                one module, compute_90 PTX only
#   many.ptx.fpk               bench/make_coldstart_inputs.sh's package (compute_80 PTX only)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
mkdir -p "$2" "$2.work"
out=$(cd "$2" && pwd)
if [ "${3:-}" = --tiny ]; then mid=2 big=5 modules=2 per_module=2 archs="80 90"
else mid=40 big=400 modules=16 per_module=50 archs="75 80 86 89 90"; fi
fp="$build/packager/fatpack"
pack_flags=(${SUITE_PACK_FLAGS:-})
cd "$out.work"
gen() {  # gen NAME KERNELS [FIRST]: regenerate the source only when its size changed
  local want; want=$(python3 "$here/gen_kernels.py" "$2" "${3:-0}")
  [ -f "$1.cu" ] && [ "$(cat "$1.cu")" = "$want" ] || printf '%s\n' "$want" > "$1.cu"
}
gen mid "$mid"
gen big "$big"
jobs=()
for sm in $archs; do
  [ mid.sm_$sm.cubin -nt mid.cu ] || nvcc -cubin -arch=sm_$sm -o mid.sm_$sm.cubin mid.cu & jobs+=($!)
done
[ mid.compute_90.ptx -nt mid.cu ] || nvcc -ptx -arch=compute_90 -o mid.compute_90.ptx mid.cu & jobs+=($!)
[ big.compute_90.ptx -nt big.cu ] || nvcc -ptx -arch=compute_90 -o big.compute_90.ptx big.cu & jobs+=($!)
for j in "${jobs[@]}"; do wait "$j"; done
gencode=()
for sm in $archs; do gencode+=(-gencode=arch=compute_$sm,code=sm_$sm); done
gencode+=(-gencode=arch=compute_90,code=compute_90)
[ mid.fatbin -nt mid.cu ] || nvcc -fatbin "${gencode[@]}" -o mid.fatbin mid.cu &
[ mid.compressed.fatbin -nt mid.cu ] || nvcc -fatbin "${gencode[@]}" -Xfatbin -compress-all -o mid.compressed.fatbin mid.cu &
wait
inputs=()
for sm in $archs; do inputs+=(mid.sm_$sm.cubin); done
inputs+=(mid.compute_90.ptx)
for codec in lz4 zstd none; do "$fp" pack -o mid.$codec.fpk --name mid --module mid --codec $codec "${inputs[@]}" >/dev/null; done
"$fp" pack -o mid.ptx.fpk --name midptx --module mid "${pack_flags[@]}" mid.compute_90.ptx >/dev/null
"$fp" pack -o big.ptx.fpk --name bigptx --module big "${pack_flags[@]}" big.compute_90.ptx >/dev/null
# The 16 x 50 set: the cold-start benchmark's own recipe (per_module kernels per module).
many_work="$out.work/many-src"
mkdir -p "$many_work"
if [ "$per_module" != 50 ]; then  # make_coldstart_inputs.sh writes 50 kernels per module: tiny sources first
  for ((m = 0; m < modules; m++)); do
    [ -f "$many_work/part$m.cu" ] || python3 "$here/gen_kernels.py" "$per_module" $((m * per_module)) > "$many_work/part$m.cu"
  done
fi
"$here/make_coldstart_inputs.sh" "$build" "$modules" "$many_work" >/dev/null
cp "$many_work/coldstart.fpk" many.ptx.fpk
# What travels to the GPU machine: the packages, the raw cubin and the fatbins.
cp -f mid.sm_90.cubin mid.fatbin mid.compressed.fatbin mid.lz4.fpk mid.zstd.fpk mid.none.fpk mid.ptx.fpk big.ptx.fpk \
  many.ptx.fpk "$out/"
ls -l "$out" | awk 'NR > 1 {s += $5; print} END {printf "total %.1f MB in %s\n", s / 1e6, "'"$out"'"}'
