#!/usr/bin/env bash
# consumer_pkgconfig: a build without CMake, from an install tree: the installed `fatpack` compiles
# and embeds a package, the program compiles and links with `pkg-config --static`, and it finds the
# package by name on the fake driver (FATPACK_LIBCUDA from the environment). The same code as a shared
# library linked with those flags (no --exclude-libs): when fatpack.pc requires nothing (fatpack built
# with FATPACK_STATIC_DEPS=ON) it and the program must need and export nothing of LZ4, zstd, xxHash
# (tests/shipping/check_self_contained.cmake).
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
# A C program, compiled and linked by the C compiler: the link line must bring the C++ library
# (before, fatpack.pc's Libs.private lacked -lstdc++ -lm and this link failed on operator new).
"$prefix/bin/fatpack" embed -o self_kernels.S self_kernels.fpk
${CC:-cc} -o c_app "$project/c/c_app.c" self_kernels.S $flags
./c_app | grep -q "loaded vadd from self_kernels"
${CXX:-c++} -std=c++17 -fPIC -shared -o libself.so "$project/selfcontained.cpp" self_kernels.cpp $flags
${CXX:-c++} -std=c++17 -o app_dso "$project/uses_self.cpp" -L. -lself -Wl,-rpath,"$PWD"
./app_dso
if [ -z "$(pkg-config --print-requires-private fatpack)" ]; then
  cmake -DLDD=ldd -DNM=nm "-DBINARIES=$PWD/app|$PWD/libself.so" \
        -P "$(dirname "$0")/../shipping/check_self_contained.cmake"
fi
