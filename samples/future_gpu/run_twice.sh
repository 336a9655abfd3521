#!/bin/sh
# Runs the future-gpu sample twice with an empty fatpack cache: the first run JIT-compiles the PTX,
# the second loads the cached SASS. The driver's own JIT cache is disabled (CUDA_CACHE_DISABLE=1) so
# that it does not answer the first run. Arguments go to both runs (e.g. --skip-without-gpu). With
# FATPACK_CACHE_PATH set, that cache is used (and kept); otherwise a temporary one, removed at the end.
#   run_twice.sh PATH/TO/future_gpu [ARGS...]
set -e
program=$1
shift
if [ -z "$FATPACK_CACHE_PATH" ]; then
  FATPACK_CACHE_PATH=$(mktemp -d "${TMPDIR:-/tmp}/fatpack-future-gpu.XXXXXX")
  trap 'rm -rf "$FATPACK_CACHE_PATH"' EXIT
fi
export FATPACK_CACHE_PATH CUDA_CACHE_DISABLE=1
echo "== run 1 (fatpack cache: $FATPACK_CACHE_PATH)"
"$program" "$@"
echo "== run 2"
"$program" "$@"
