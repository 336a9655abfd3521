#!/usr/bin/env bash
# Installs what is missing, builds fatpack with its tests and runs them (CPU suite; GPU tests run
# too and report themselves skipped when there is no GPU). Build folder: build/ (or $FATPACK_BUILD_DIR).
# Then the sanitizer jobs: the runtime, core and their unit and stress tests (not the consumer builds,
# not the CLI tests) built again under ASan+UBSan (build-asan/), only the targets those tests need
# (FATPACK_SANITIZE, README "Tests").
# FATPACK_SANITIZER_JOBS=0 skips them (a quick local run).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build=${FATPACK_BUILD_DIR:-build}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"

[ "${FATPACK_SANITIZER_JOBS:-1}" = 0 ] && exit 0
# sanitizer_job DIR SANITIZE TESTS...: builds the tests' executables (CMake adds what they depend on)
# and runs them; a sanitizer report fails the test that printed it.
sanitizer_job() {
  local dir=$1 san=$2
  shift 2
  # -O1: what sanitizers need to report well, and about half the compile time of Release's -O3 on
  # the 2-core CI machine (the sanitizer build must stay a few minutes).
  cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS=-O1 -DCMAKE_CXX_FLAGS=-O1 -DFATPACK_SANITIZE="$san" \
    -DFATPACK_BUILD_SAMPLES=OFF -DFATPACK_BUILD_BENCH=OFF -DFATPACK_INSTALL=OFF >/dev/null
  cmake --build "$dir" -j "$(nproc)" --target "$@"
  local re
  re="^($(IFS='|'; echo "$*"))\$"
  ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" -R "$re"
}
# Leak checking is off: LeakSanitizer's tracer crashes inside `unshare -m` (the full-disk process test).
export ASAN_OPTIONS=detect_leaks=0:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# ASan+UBSan: every unit and stress test of core and the runtime, the malformed-input sweeps and the
# fuzz corpora (ctest test names; each is also its executable's target name, see tests/*/CMakeLists.txt).
sanitizer_job "$build-asan" address,undefined format_test inputs_test select_test error_test runtime_test \
  cache_unit_test cache_process_test malformed_test golden_test fuzz_package_replay fuzz_fatbin_replay \
  fuzz_cubin_replay fuzz_ptx_replay fuzz_input_replay fuzz_cache_entry_replay fuzz_index_replay
