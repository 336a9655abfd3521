#!/usr/bin/env bash
# Installs what is missing, builds fatpack with its tests and runs them (CPU suite; GPU tests run
# too and report themselves skipped when there is no GPU). Build folder: build/ (or $FATPACK_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build=${FATPACK_BUILD_DIR:-build}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
