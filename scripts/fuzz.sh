#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with Clang, ASan and UBSan, seeds them with real inputs
# (the committed malformed files, nvcc output, packages of it, cache entries written by `fatpack
# warm` through the fake driver) and runs each for SECONDS (default 60). A crash leaves its input in
# BUILD/fuzz-findings/ and the script exits 1.
#   scripts/fuzz.sh [SECONDS]        (build folder: build-fuzz, or $FATPACK_FUZZ_BUILD_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
build=${FATPACK_FUZZ_BUILD_DIR:-build-fuzz}
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFATPACK_BUILD_FUZZERS=ON \
  -DFATPACK_BUILD_SAMPLES=OFF -DFATPACK_BUILD_BENCH=OFF -DFATPACK_INSTALL=OFF \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz_package fuzz_input fuzz_cache_entry fatpack fakecuda fatpack_test_artifacts
fp=$build/packager/fatpack
art=$build/tests/artifacts
corpus=$build/fuzz-corpus
findings=$build/fuzz-findings
mkdir -p "$corpus"/{package,input,cache_entry} "$findings"
cp tests/data/malformed/*.fpk "$corpus/package/"
cp tests/data/inputs/* "$art"/*.cubin "$art"/*.ptx "$art"/*.fatbin "$corpus/input/"
for codec in lz4 zstd none; do
  "$fp" pack -o "$corpus/package/vadd-$codec.fpk" --codec "$codec" "$art"/vadd.sm_*.cubin "$art"/vadd.compute_*.ptx
done
cache=$(cd "$build" && pwd)/fuzz-cache
rm -rf "$cache"
"$fp" pack -o "$build/fuzz-ptx.fpk" "$art/vadd.compute_80.ptx"   # PTX only: every target is a JIT
FATPACK_LIBCUDA=$(find "$build" -name libfakecuda.so | head -1) FAKECUDA_DEVICES=90 \
  "$fp" warm -q --path "$cache" --target sm_80,sm_90,sm_120 "$build/fuzz-ptx.fpk"
find "$cache" -name '*.fpc' -exec cp {} "$corpus/cache_entry/" \;
rc=0
for f in package input cache_entry; do
  echo "== fuzz_$f, $secs s, $(ls "$corpus/$f" | wc -l) seeds"
  if ! "$build/tests/fuzz/fuzz_$f" -max_total_time="$secs" -rss_limit_mb=4096 -max_len=1048576 \
    -artifact_prefix="$findings/$f-" "$corpus/$f" >"$build/fuzz_$f.log" 2>&1; then
    rc=1
  fi
  grep -E "DONE|ERROR|SUMMARY|Done [0-9]+ runs" "$build/fuzz_$f.log" || tail -5 "$build/fuzz_$f.log"
done
ls "$findings" | grep -q . && { echo "findings in $findings:"; ls "$findings"; rc=1; }
exit $rc
