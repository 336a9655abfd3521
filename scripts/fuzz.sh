#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with Clang, ASan and UBSan and runs each, seeded with its
# committed corpus (tests/fuzz/corpus/<target>/: real nvcc output, packages, cache entries and an
# index written by today's writers, the committed malformed files), with -malloc_limit_mb: an input
# that makes a reader allocate more than the limit (a forged size) is a finding, like a crash. A
# finding leaves its input in BUILD/fuzz-findings/ and the script exits 1.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   (default 60 s each; targets: all)
# Environment: FATPACK_FUZZ_BUILD_DIR (build-fuzz), FATPACK_FUZZ_RUNS=N (stop after N executions
# instead of SECONDS), FATPACK_FUZZ_MALLOC_MB (2048), FATPACK_FUZZ_MERGE=1 (afterwards merge what
# the run found into tests/fuzz/corpus/<target>/, keeping only inputs that add coverage: how the
# committed corpora are grown; review the size before committing).
# Prints one line per target: executions, seconds, executions per second, corpus size, findings.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
all=(package fatbin cubin ptx ptx_split input jit_options kernel_name cache_entry index)
targets=("$@")
[ $# -eq 0 ] && targets=("${all[@]}")
build=${FATPACK_FUZZ_BUILD_DIR:-build-fuzz}
malloc_mb=${FATPACK_FUZZ_MALLOC_MB:-2048}
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFATPACK_BUILD_FUZZERS=ON \
  -DFATPACK_BUILD_TESTS=OFF -DFATPACK_BUILD_SAMPLES=OFF -DFATPACK_BUILD_BENCH=OFF -DFATPACK_INSTALL=OFF \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"
findings=$build/fuzz-findings
mkdir -p "$findings"
rc=0
for t in "${targets[@]}"; do
  corpus=$build/fuzz-corpus/$t
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus/"
  limit=(-max_total_time="$secs")
  [ -n "${FATPACK_FUZZ_RUNS:-}" ] && limit=(-runs="$FATPACK_FUZZ_RUNS")
  log=$build/fuzz_$t.log
  start=$(date +%s.%N)
  if ! "$build/tests/fuzz/fuzz_$t" "${limit[@]}" -malloc_limit_mb="$malloc_mb" -rss_limit_mb=4096 -max_len=1048576 \
    -print_final_stats=1 -artifact_prefix="$findings/$t-" "$corpus" >"$log" 2>&1; then
    rc=1
  fi
  end=$(date +%s.%N)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  awk -v t="$t" -v n="${execs:-0}" -v s="$start" -v e="$end" -v c="$(ls "$corpus" | wc -l)" \
    -v b="$(du -sb "$corpus" | cut -f1)" 'BEGIN { d = e - s; printf "fuzz_%-12s %12d executions in %6.0f s (%8.0f/s), corpus %d files (%d bytes)\n", t, n, d, n / d, c, b }'
  grep -E "^==[0-9]+==ERROR|SUMMARY|out-of-memory|Test unit written" "$log" || true
  if [ "${FATPACK_FUZZ_MERGE:-0}" = 1 ]; then
    "$build/tests/fuzz/fuzz_$t" -merge=1 -malloc_limit_mb="$malloc_mb" -max_len=1048576 tests/fuzz/corpus/"$t" "$corpus" \
      >"$build/fuzz_${t}_merge.log" 2>&1 || rc=1
    echo "  merged: tests/fuzz/corpus/$t now $(ls tests/fuzz/corpus/"$t" | wc -l) files ($(du -sb tests/fuzz/corpus/"$t" | cut -f1) bytes)"
  fi
done
if ls "$findings" | grep -q .; then
  echo "findings in $findings:"
  ls "$findings"
  rc=1
fi
exit $rc
