// XXH3-64 compiled for AVX2: xxHash's header inlined into this file alone, which core/CMakeLists.txt
// builds with -mavx2. core::xxh3 (codec.cpp) calls it only where the CPU has AVX2. C, not C++: a C++
// inline function compiled here for AVX2 could be the copy the linker keeps for the whole program.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <stddef.h>
#include <stdint.h>

#if !defined(__AVX2__)
#error "xxh3_avx2.c must be compiled with -mavx2"
#endif

__attribute__((visibility("hidden"))) uint64_t fatpack_xxh3_avx2(const void* data, size_t size) {
  return XXH3_64bits(data, size);
}
