#!/usr/bin/env bash
# consumer_pkgconfig: a build without CMake, from an install tree: the installed `fatpack` compiles
# and embeds a package, the program compiles and links with `pkg-config --static`, and it finds the
# package by name on the fake driver (FATPACK_LIBCUDA from the environment).
#   pkgconfig_test.sh PREFIX PROJECT_DIR WORK_DIR
set -euo pipefail
prefix=$1 project=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
"$prefix/bin/fatpack" build -o self_kernels.fpk --arch 90-real "$project/kernels/vadd.cu"
"$prefix/bin/fatpack" embed -o self_kernels.cpp self_kernels.fpk
flags=$(pkg-config --static --cflags --libs fatpack)
echo "pkg-config --static --cflags --libs fatpack: $flags"
# selfcontained.cpp loads module vadd of package self_kernels; uses_self.cpp calls it.
${CXX:-c++} -std=c++17 -o app "$project/uses_self.cpp" "$project/selfcontained.cpp" self_kernels.cpp $flags
./app
