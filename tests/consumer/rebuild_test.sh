#!/usr/bin/env bash
# consumer_rebuild: what an edit rebuilds (Ninja). A copy of project/ against the install tree:
#  - touching one .cu recompiles only its own (source, arch) steps and re-packs; the package's bytes
#    do not change, so nothing is re-embedded or relinked (the tool writes only on change + restat);
#  - a real change to one .cu re-embeds and relinks only the target that carries it;
#  - a header edit recompiles only the module that includes it (nvcc depfile);
#  - a build with nothing changed does nothing.
# The source copy and the build directory have spaces in their names: nvcc's depfile names its
# target as given, and an unescaped "build dir/..." read as two targets, so every build ran nvcc
# again for every kernel. The copy asks for CMake 3.18, where CMP0116 is OLD (no depfile
# transform): fatpack's functions set it themselves (before, an absolute depfile target never
# matched Ninja's relative output there, spaces or not).
#   rebuild_test.sh PREFIX PROJECT_DIR WORK_DIR
set -euo pipefail
prefix=$1 project=$2 work=$3
src="$work/src dir" build="$work/build dir"
rm -rf "$work" && mkdir -p "$work" && cp -r "$project" "$src"
sed -i 's/^cmake_minimum_required(VERSION [0-9.]*)/cmake_minimum_required(VERSION 3.18)/' "$src/CMakeLists.txt"
grep -q '^cmake_minimum_required(VERSION 3.18)' "$src/CMakeLists.txt" || { echo "FAIL: the copy's CMake version was not lowered"; exit 1; }
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CUDA_ARCHITECTURES=86-real -DEXPECT_DEFAULT_TARGETS=sm_86 >/dev/null
cmake --build "$build" >/dev/null
sleep 1  # coarse file-system timestamps

step() {  # step NAME: build, show and keep the output
  echo "== $1"
  out=$(cmake --build "$build" | grep -v 'Re-running CMake\|^-- ' || true)
  echo "$out"
}
has() { grep -q -- "$1" <<<"$out" || { echo "FAIL: expected '$1'"; exit 1; }; }
lacks() { if grep -q -- "$1" <<<"$out"; then echo "FAIL: did not expect '$1'"; exit 1; fi; }

touch "$src/kernels/saxpy.cu"
step "touch saxpy.cu"
has "nvcc saxpy -> sm_90"; has "pack app_more"; lacks "nvcc scale"; lacks "nvcc vadd"; lacks "embed"; lacks "Linking"

printf '\nextern "C" __global__ void saxpy_twice(float a, const float* x, float* y, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] += 2.0f * a * x[i];\n}\n' >>"$src/kernels/saxpy.cu"
sleep 1
step "change saxpy.cu"
has "nvcc saxpy -> sm_90"; has "embed app_more"; has "Linking CXX executable app"
lacks "nvcc scale"; lacks "nvcc vadd"; lacks "libcarrier"; lacks "libselfcontained"; lacks "executable defaults"

echo '#define SCALE_FACTOR 3.0f' >"$src/include/scale_factor.h"
sleep 1
step "change include/scale_factor.h"
has "nvcc scale -> sm_90"; lacks "nvcc saxpy"; lacks "nvcc vadd"; has "Linking CXX executable app"

step "nothing changed"
has "no work to do"
echo "rebuild: ok"
