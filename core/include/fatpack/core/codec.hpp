// Per-entry compression (docs/format.md §5). Payloads are split into independent blocks so a large
// entry can be decompressed on several threads; a block that does not shrink is stored raw.
#pragma once

#include "fatpack/core/error.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace fatpack::core {

enum class codec : std::uint8_t { none = 0, lz4 = 1, zstd = 2 };

const char* codec_name(codec c) noexcept;             // "none", "lz4", "zstd"
result<codec> parse_codec(std::string_view name);     // inverse of codec_name
int default_level(codec c) noexcept;                  // lz4: LZ4HC_CLEVEL_MAX (12), zstd: 19, none: 0
std::uint32_t default_block_size(codec c) noexcept;   // bytes of raw data per block
// The largest block size writers produce and readers accept (1 GiB; docs/format.md §5).
inline constexpr std::uint32_t max_block_size = 1u << 30;
// The most raw bytes one stored byte of a block can decode to, by the codec's own format: an LZ4
// match-length byte adds at most 255 bytes (a sequence costs 3 bytes for at least 19); a zstd block
// yields at most 128 KiB and takes at least 4 bytes (an RLE block: 3-byte header, 1 byte). Readers
// refuse a raw_size above stored bytes x this (docs/format.md §5).
constexpr std::uint64_t max_expansion(codec c) noexcept {
  return c == codec::lz4 ? 255 : c == codec::zstd ? 32768 : 1;
}

// Compresses `raw` into the blocked payload layout of docs/format.md §5 (level < 0: the codec's
// default; block_size 0: the codec's default). Links zstd's encoder: for package writers.
result<std::vector<std::uint8_t>> compress(codec c, int level, std::uint32_t block_size, byte_span raw);
// compress(codec::lz4, ...) without zstd's encoder: what the runtime's cache uses, so that the
// runtime links zstd's decoder only (docs/deployment.md "What the runtime adds to a program").
result<std::vector<std::uint8_t>> compress_lz4(int level, std::uint32_t block_size, byte_span raw);

// Decompresses a blocked payload into out[0, raw_size). Validates every block size against the
// payload and the output; never writes outside `out`. `threads` > 1 decompresses blocks in parallel.
status decompress(codec c, std::uint32_t block_size, byte_span stored, std::uint8_t* out,
                  std::uint64_t raw_size, unsigned threads = 1);

// XXH3-64 of bytes (the checksum used everywhere in the format).
std::uint64_t xxh3(byte_span bytes) noexcept;

}  // namespace fatpack::core
