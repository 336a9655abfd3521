#!/usr/bin/env bash
# Installs what is missing, builds fatpack with its tests and runs them (CPU suite; GPU tests run
# too and report themselves skipped when there is no GPU). Build folder: build/ (or $FATPACK_BUILD_DIR).
# Then the sanitizer jobs: the runtime, core and their unit and stress tests (not the consumer builds,
# not the CLI tests) built again under ASan+UBSan (build-asan/) and the thread pool's, the JIT
# service's and the cache's threaded and stress tests under TSan (build-tsan/), only the targets
# those tests need (FATPACK_SANITIZE, README "Tests", docs/reliability.md §3).
# FATPACK_SANITIZER_JOBS=0 skips them (a quick local run); =asan or =tsan runs only that one; 1 (the
# default) both; anything else is refused.
# Each phase prints how long it took ("test.sh: ... took N s").
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
took() {  # took WHAT: prints the seconds since the last took (or the start)
  echo "test.sh: $1 took $((SECONDS - t0)) s"
  t0=$SECONDS
}
./scripts/install-deps.sh
took "install-deps"
build=${FATPACK_BUILD_DIR:-build}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
# The test sources at -O0 (FATPACK_TEST_CXX_FLAGS; core, the runtime, the tool, the samples and the
# benchmarks stay Release): the doctest-heavy files compile 3.6 times faster (cache_unit_test.cpp:
# 9 s against 33 s), about a quarter of the main build on the 2-core CI machine.
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DFATPACK_TEST_CXX_FLAGS=-O0
cmake --build "$build" -j "$(nproc)"
took "main build"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
took "main ctest"

jobs=${FATPACK_SANITIZER_JOBS:-1}
case "$jobs" in
  0) exit 0 ;;
  1 | asan | tsan) ;;
  *) echo "test.sh: FATPACK_SANITIZER_JOBS='$jobs': expected 1 (both, the default), 0 (none), asan or tsan" >&2; exit 2 ;;
esac
# sanitizer_job NAME SANITIZE TESTS...: builds the tests' executables (CMake adds what they depend on)
# into $build-NAME and runs them; a sanitizer report fails the test that printed it.
sanitizer_job() {
  local name=$1 san=$2 dir=$build-$1
  shift 2
  # What keeps these builds to a few minutes on the 2-core CI machine:
  #  - core and the runtime at -O1 (what sanitizers need to report well; about half the compile
  #    time of Release's -O3), the test sources at -O0 (FATPACK_TEST_CXX_FLAGS: the same
  #    instrumentation, a third of the compile time of -O1 for the doctest-heavy files);
  #  - unity builds (CMAKE_UNITY_BUILD: a library's sources compiled a few at a time in one
  #    translation unit; the ASan build of core and the runtime took 341 CPU-s file by file), which
  #    is why no two source files of a target may define the same name in an anonymous namespace;
  #  - the main build's `fatpack` tool for the packages that runtime_test embeds
  #    (FATPACK_EXECUTABLE) and its nvcc/fatbinary test artifacts (FATPACK_TEST_ARTIFACTS_FROM):
  #    the CLI is not what these jobs test, and the artifacts do not depend on the sanitizer.
  local main
  main=$(cd "$build" && pwd)
  cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS=-O1 -DCMAKE_CXX_FLAGS=-O1 \
    -DFATPACK_TEST_CXX_FLAGS=-O0 -DFATPACK_SANITIZE="$san" \
    -DFATPACK_EXECUTABLE="$main/packager/fatpack" -DFATPACK_TEST_ARTIFACTS_FROM="$main/tests/artifacts" \
    -DFATPACK_BUILD_SAMPLES=OFF -DFATPACK_BUILD_BENCH=OFF -DFATPACK_INSTALL=OFF -DCMAKE_UNITY_BUILD=ON >/dev/null
  cmake --build "$dir" -j "$(nproc)" --target "$@"
  took "sanitizer job $name: build"
  local re
  re="^($(IFS='|'; echo "$*"))\$"
  ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" -R "$re"
  took "sanitizer job $name: tests"
}
# Leak checking is off: LeakSanitizer's tracer crashes inside `unshare -m` (the full-disk process test).
export ASAN_OPTIONS=detect_leaks=0:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# TSan: tests/tsan.supp holds the false positives of the uninstrumented libstdc++ (each entry says why).
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
# ASan+UBSan: every unit and stress test of core and the runtime, the malformed-input sweeps and the
# fuzz corpora (ctest test names; each is also its executable's target name, see tests/*/CMakeLists.txt).
if [ "$jobs" = 1 ] || [ "$jobs" = asan ]; then
  sanitizer_job asan address,undefined format_test inputs_test select_test error_test runtime_test pieces_test nvrtc_test \
    cache_unit_test cache_process_test malformed_test golden_test fuzz_package_replay fuzz_fatbin_replay \
    fuzz_cubin_replay fuzz_ptx_replay fuzz_input_replay fuzz_jit_options_replay fuzz_kernel_name_replay \
    fuzz_cache_entry_replay fuzz_index_replay fuzz_ptx_split_replay remote_layer_test http_store_test \
    redis_store_test
fi
# TSan: the thread pool (format_test), the JIT service's single flight, warm-up and store queue and
# the runtime's 16-thread loads (runtime_test), kernel-granular JIT's pieces (pieces_test), the cache's threaded cases (cache_unit_test) and
# the multi-process stress with TSan-built probes (cache_process_test), the fleet cache's layer
# (its background queue, leases) and HTTP store (pooled connections from 8 threads).
if [ "$jobs" = 1 ] || [ "$jobs" = tsan ]; then
  sanitizer_job tsan thread format_test runtime_test pieces_test cache_unit_test cache_process_test remote_layer_test \
    http_store_test redis_store_test
fi
