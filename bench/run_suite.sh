#!/usr/bin/env bash
# The benchmark suite (docs/benchmarks.md, "Benchmark suite"; the program is bench/fatpack_suite.cpp).
#
#   bench/run_suite.sh inputs BUILD_DIR
#       HERE (needs nvcc, no GPU): BUILD_DIR/suite-inputs (31 MB; scratch in BUILD_DIR/suite-inputs.work).
#       Needs the targets fatpack (packager) and fatpack_suite built.
#   bench/run_suite.sh run BUILD_DIR OUT_DIR CASES [fatpack_suite options...]
#       On the GPU machine: the cases (ids or groups: mid, big, many, procs, speed, comma-separated) with
#       --deadline-s 500 (no round starts that would end past 500 s) inside a 565 s timeout; raw
#       samples in OUT_DIR/suite.tsv (written as they are measured), this call's section in OUT_DIR/suite.md.
#       Needs only BUILD_DIR/bench/fatpack_suite and BUILD_DIR/suite-inputs.
#   bench/run_suite.sh merge DOC TSV...
#       Renders every TSV (several calls) into one section of DOC (between the fatpack_suite markers).
#   bench/run_suite.sh smoke BUILD_DIR FAKE_LIBCUDA
#       The ctest (label bench): tiny inputs, every case once against the fake driver; checks that the
#       section has a row per case, with a time, or "skipped (no GPU)" for the GPU-only ones.
#
# A GPU session in three calls (H200, 16 cores; each under the 9.5-minute limit, about 12-16 min in all):
#   1. mid,procs,speed  ~4 min  (8 fast cases x 15 runs, mid JITs x 3, N = 1/4/8/16 processes x 3, speed)
#   2. big              ~3-8 min (driver ~30 s, split-compile ~9 s x2, fatpack 1/5/all kernels; 3 runs each)
#   3. many             ~4 min  (driver ~54 s, split-compile ~20 s, fatpack ~5 s; 3 runs each)
# When a call is cut short, its TSV still holds every finished run; the report marks the cases with
# fewer runs than the default (rerun with --jit-runs 1 if the budget forces it; the report says so).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}
shift || true
case "$cmd" in
  inputs)
    build=$(cd "$1" && pwd)
    "$here/make_suite_inputs.sh" "$build" "$build/suite-inputs"
    ;;
  run)
    build=$(cd "$1" && pwd)
    out=$2
    cases=$3
    shift 3
    mkdir -p "$out"
    nproc
    cat /proc/driver/nvidia/version 2>/dev/null | head -1 || true
    rc=0
    timeout 565 "$build/bench/fatpack_suite" --inputs "$build/suite-inputs" --out-dir "$out" --cases "$cases" \
      --deadline-s 500 "$@" || rc=$?
    [ "$rc" = 124 ] && echo "run_suite.sh: cut at 565 s; $out/suite.tsv keeps the finished runs (merge renders them)"
    exit "$rc"
    ;;
  merge)
    doc=$1
    shift
    suite=$(dirname "$here")/build/bench/fatpack_suite
    [ -x "$suite" ] || suite=fatpack_suite
    "${FATPACK_SUITE:-$suite}" --render "$@" --doc "$doc"
    ;;
  smoke)
    build=$(cd "$1" && pwd)
    fake=$2
    if ! command -v nvcc >/dev/null; then echo "SKIPPED: nvcc not on PATH (the smoke inputs are compiled)"; exit 77; fi
    work="$build/bench/suite-smoke"
    rm -rf "$work/out"
    "$here/make_suite_inputs.sh" "$build" "$work/inputs" --tiny >/dev/null
    suite="$build/bench/fatpack_suite"
    FATPACK_LIBCUDA="$fake" FAKECUDA_DEVICES=90 "$suite" --inputs "$work/inputs" --out-dir "$work/out" --runs 1 \
      --tmp "$work" >"$work/stdout.txt"
    md="$work/out/suite.md"
    bad=0
    while read -r id _group gpu_only; do
      if [ "$id" = speed ]; then  # its own section, not a table row
        grep -q "Kernel speed: skipped (no GPU)" "$md" || { echo "speed not reported"; bad=1; }
        continue
      fi
      row=$(grep -F "| \`$id\` |" "$md" || true)
      if [ -z "$row" ]; then echo "no row for case $id"; bad=1; continue; fi
      if [ "$gpu_only" = gpu-only ]; then
        case "$row" in *"skipped (no GPU)"*) ;; *) echo "GPU-only case $id not skipped: $row"; bad=1 ;; esac
      else
        case "$row" in *" ms |"*|*" s |"*) ;; *) echo "case $id has no time: $row"; bad=1 ;; esac
      fi
    done < <("$suite" --list-cases)
    # merge: twice into a copy of the doc; the section is replaced, not appended again.
    cp "$here/../docs/benchmarks.md" "$work/doc.md"
    "$suite" --render "$work/out/suite.tsv" --doc "$work/doc.md" >/dev/null
    "$suite" --render "$work/out/suite.tsv" "$work/out/suite.tsv" --doc "$work/doc.md" >/dev/null
    n=$(grep -c "fatpack_suite:begin" "$work/doc.md")
    [ "$n" = 1 ] || { echo "merge wrote the section $n times"; bad=1; }
    grep -q "^## Package size" "$work/doc.md" || { echo "merge lost the doc's other sections"; bad=1; }
    [ "$bad" = 0 ] && echo "suite smoke: every case has its row ($(grep -c '^| `' "$md") rows)"
    exit "$bad"
    ;;
  *)
    sed -n '2,25p' "$0"
    exit 2
    ;;
esac
