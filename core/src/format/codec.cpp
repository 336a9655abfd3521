// Per-entry codecs in the blocked layout of docs/format.md §5: names, levels, decompression, XXH3.
// Compression is in codec_compress.cpp (LZ4) and codec_zstd_compress.cpp (zstd), so that a program
// that only reads packages and writes LZ4 cache entries (the runtime) never links zstd's encoder.
//
// Why blocks: a package entry (or a cache entry) is decompressed on the start-up path. Independent
// blocks let a large image be decompressed on several threads, and a block that does not shrink is
// stored raw, so incompressible data costs a memcpy instead of a decoder pass.
#include "fatpack/core/codec.hpp"

#include "fatpack/core/thread_pool.hpp"
#include "format/codec_blocks.hpp"

#include <lz4.h>
#include <lz4hc.h>  // LZ4HC_CLEVEL_MAX
#include <xxhash.h>
#include <zstd.h>
#if FATPACK_XXH3_AVX2
extern "C" std::uint64_t fatpack_xxh3_avx2(const void* data, std::size_t size);  // xxh3_avx2.c
#endif

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

namespace fatpack::core {
namespace {

std::uint32_t read_u32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}

}  // namespace

const char* codec_name(codec c) noexcept {
  switch (c) {
    case codec::none: return "none";
    case codec::lz4: return "lz4";
    case codec::zstd: return "zstd";
  }
  return "unknown";
}

result<codec> parse_codec(std::string_view name) {
  if (name == "none") return codec::none;
  if (name == "lz4") return codec::lz4;
  if (name == "zstd") return codec::zstd;
  return make_error(errc::invalid_argument, "unknown codec '" + std::string(name) + "' (expected lz4, zstd or none)");
}

int default_level(codec c) noexcept {
  switch (c) {
    case codec::lz4: return LZ4HC_CLEVEL_MAX;
    case codec::zstd: return 19;
    case codec::none: return 0;
  }
  return 0;
}

std::uint32_t default_block_size(codec c) noexcept {
  // lz4 decodes at ~4 GB/s per thread: 256 KiB blocks let a 1 MB cubin use 4 threads for 2% in
  // size (LZ4's window is 64 KiB). zstd's ratio depends on long matches: on the 'mid' set, 1 MiB
  // blocks gave 0.806x nvcc's compressed fatbin and 4 MiB blocks 0.785x (docs/benchmarks.md), so
  // zstd blocks are 4 MiB and only very large entries are split.
  switch (c) {
    case codec::lz4: return 256u << 10;
    case codec::zstd: return 4u << 20;
    case codec::none: return 0;
  }
  return 0;
}

// The same hash either way: xxHash's AVX2 code where the CPU has AVX2 (core/CMakeLists.txt), about 3x
// the speed of the library's SSE2 build on a 1 MB cubin.
std::uint64_t xxh3(byte_span bytes) noexcept {
#if FATPACK_XXH3_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return fatpack_xxh3_avx2(bytes.data, bytes.size);
#endif
  return XXH3_64bits(bytes.data, bytes.size);
}

status decompress(codec c, std::uint32_t block_size, byte_span stored, std::uint8_t* out, std::uint64_t raw_size,
                  unsigned threads) {
  if (c == codec::none) {
    if (stored.size != raw_size)
      return make_error(errc::malformed, "stored_size " + std::to_string(stored.size) +
                                             " differs from raw_size " + std::to_string(raw_size) + " for codec none");
    if (raw_size) std::memcpy(out, stored.data, std::size_t(raw_size));
    return {};
  }
  if (c != codec::lz4 && c != codec::zstd)
    return make_error(errc::malformed, "unknown codec id " + std::to_string(int(c)));
  if (block_size == 0) return make_error(errc::malformed, "block_size is 0 for a compressed entry");

  const std::uint64_t n = detail::block_count(raw_size, block_size);
  if (n > stored.size / 4)
    return make_error(errc::malformed, "block table of " + std::to_string(n) + " blocks does not fit in stored_size " +
                                           std::to_string(stored.size));
  // Validate the whole block table first: every block lies inside the payload and the sizes add up.
  std::vector<std::uint64_t> offsets(std::size_t(n) + 1);
  offsets[0] = 4 * n;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint32_t len = read_u32(stored.data + 4 * i);
    offsets[std::size_t(i) + 1] = offsets[std::size_t(i)] + len;
    if (offsets[std::size_t(i) + 1] > stored.size)
      return make_error(errc::malformed, "block " + std::to_string(i) + " (" + std::to_string(len) +
                                             " bytes) runs past the stored payload (" + std::to_string(stored.size) +
                                             " bytes)");
  }
  if (offsets[std::size_t(n)] != stored.size)
    return make_error(errc::malformed, "blocks cover " + std::to_string(offsets[std::size_t(n)]) +
                                           " bytes but stored_size is " + std::to_string(stored.size));

  std::vector<std::string> failures(static_cast<std::size_t>(n));
  // Small entries are not worth waking a worker.
  if (raw_size < 2 * std::uint64_t(block_size)) threads = 1;
  // Below 4 MiB (about 1 ms of lz4 on one core) no thread is started for the decode: only workers
  // already waiting help. Starting 3 threads in a fresh process took 0.2 to 6 ms on a loaded
  // 2-vCPU VM, and a program's first cache hit or SASS load always meets an empty pool
  // (docs/benchmarks.md "Hits in fresh processes"); a warm process keeps its parallel decode.
  constexpr std::uint64_t start_threads_from = 4u << 20;
  if (threads > 1 && raw_size < start_threads_from)
    threads = std::min(threads, 1 + thread_pool::shared().idle_workers());
  parallel_for(std::size_t(n), threads, [&](std::size_t i) {
    const std::uint8_t* src = stored.data + offsets[i];
    const std::size_t src_len = std::size_t(offsets[i + 1] - offsets[i]);
    std::uint8_t* dst = out + i * std::uint64_t(block_size);
    const std::size_t dst_len = std::size_t(std::min<std::uint64_t>(block_size, raw_size - i * std::uint64_t(block_size)));
    if (src_len == dst_len) {  // stored raw
      std::memcpy(dst, src, dst_len);
      return;
    }
    if (c == codec::lz4) {
      const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(dst),
                                          int(src_len), int(dst_len));
      if (got != int(dst_len))
        failures[i] = got < 0 ? "corrupt LZ4 data" : "LZ4 block decoded to " + std::to_string(got) + " bytes, expected " +
                                                        std::to_string(dst_len);
    } else {
      const std::size_t got = ZSTD_decompress(dst, dst_len, src, src_len);
      if (ZSTD_isError(got))
        failures[i] = std::string("zstd: ") + ZSTD_getErrorName(got);
      else if (got != dst_len)
        failures[i] = "zstd block decoded to " + std::to_string(got) + " bytes, expected " + std::to_string(dst_len);
    }
  });
  for (std::size_t i = 0; i < n; ++i)
    if (!failures[i].empty())
      return make_error(errc::codec, "block " + std::to_string(i) + ": " + failures[i]);
  return {};
}

}  // namespace fatpack::core
