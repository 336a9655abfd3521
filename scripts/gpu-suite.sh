#!/usr/bin/env bash
# The GPU part of fatpack's tests and benchmarks, run from a build tree on a machine with an NVIDIA
# GPU and driver (the figures in docs/runtime.md §10, docs/cache.md and docs/benchmarks.md):
#   scripts/gpu-suite.sh BUILD_DIR [LOG_FILE] [--coldstart]
# Inputs are made beforehand on the build machine (they need nvcc and the fatpack tool):
#   bench/run_package_bench.sh BUILD_DIR              # the mid set (BUILD_DIR/bench-mid)
#   BUILD_DIR/packager/fatpack pack -o BUILD_DIR/bench-mid/mid.ptx.fpk --name midptx \
#       BUILD_DIR/bench-mid/mid.compute_90.ptx       # one PTX-only module of the mid set
#   cp BUILD_DIR/bench-mid/mid.compute_90.ptx ...      # used by the cache benchmark as is
#   bench/make_coldstart_inputs.sh BUILD_DIR 16        # for --coldstart (about 90 s on an H200)
# Every benchmark sets CUDA_CACHE_DISABLE=1 where it times fatpack's own cold JIT.
set -uo pipefail
build=$(cd "$1" && pwd)
log=${2:-$build/gpu-suite.log}
coldstart=0
[ "${3:-}" = --coldstart ] && coldstart=1
: >"$log"
rc=0
step() {
  local name=$1
  shift
  echo "== $name: $*" | tee -a "$log"
  "$@" 2>&1 | tee -a "$log"
  local s=${PIPESTATUS[0]}
  [ "$s" = 0 ] || { echo "== $name exited $s" | tee -a "$log"; rc=1; }
}
mid=$build/bench-mid
step gpu nvidia-smi -L
step gpu-tests ctest --test-dir "$build" -L gpu -V --output-on-failure
step runtime-load "$build/tests/runtime/fatpack_runtime_load_bench" "$mid/mid.sm_90.cubin" 30
if [ -f "$mid/mid.lz4.fpk" ]; then
  step package-load "$build/bench/fatpack_load_bench" --cubin "$mid/mid.sm_90.cubin" \
    --fatbin "$mid/mid.compressed.fatbin" --runs 30 "$mid/mid.lz4.fpk" "$mid/mid.zstd.fpk" "$mid/mid.none.fpk"
fi
step processes "$build/bench/fatpack_coldstart_bench" "$mid/mid.ptx.fpk" --processes 8
big=()
[ -f "$mid/big.sm_90.cubin" ] && big=(--cubin "$mid/big.sm_90.cubin")  # python3 bench/gen_kernels.py 400, nvcc -cubin
step cache "$build/bench/fatpack_cache_bench" --cubin "$mid/mid.sm_90.cubin" "${big[@]}" --ptx "$mid/mid.compute_90.ptx" \
  --runs 21
step future-gpu-sample "$(dirname "$0")/../samples/future_gpu/run_twice.sh" "$build/samples/future_gpu/future_gpu"
# Run-time compilation (docs/nvrtc.md): the mid source's 40 kernels through NVRTC, NVIDIA's cache and
# fatpack::compile, in fresh processes (about 70 s on an H200: 14 multi-second compiles).
nvrtc_work=$build/bench-nvrtc
mkdir -p "$nvrtc_work"
python3 "$(dirname "$0")/../bench/gen_kernels.py" 40 0 | grep -v '#include' >"$nvrtc_work/mid.cu"
step nvrtc "$build/bench/fatpack_nvrtc_bench" "$nvrtc_work/mid.cu" --runs 3 --hit-runs 10 --work "$nvrtc_work/work"
if [ "$coldstart" = 1 ]; then
  step coldstart "$build/bench/fatpack_coldstart_bench" "$build/bench-coldstart/coldstart.fpk"
fi
exit $rc
