# Finds fatpack's dependencies as installed (Debian) packages. Nothing is vendored or downloaded
# (docs/design.md §6). Each library becomes an imported target named fatpack_dep::<name>.
include_guard(GLOBAL)
find_package(PkgConfig REQUIRED)
pkg_check_modules(FATPACK_LZ4 REQUIRED IMPORTED_TARGET liblz4)
pkg_check_modules(FATPACK_ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(FATPACK_XXHASH REQUIRED IMPORTED_TARGET libxxhash)
find_package(Threads REQUIRED)
include(FatpackStaticDeps)          # fatpack_deps: LZ4, zstd, xxHash static and hidden, or shared
find_package(CUDAToolkit REQUIRED)   # nvcc, fatbinary and cuda.h (types only; libcuda is dlopen-ed)
find_package(Boost 1.74 REQUIRED)    # header-only: Boost.Interprocess (the cache)
