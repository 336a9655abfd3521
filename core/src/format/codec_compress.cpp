// Compression in the blocked layout of docs/format.md §5, and LZ4's: what the runtime's cache writes
// (compress_lz4). zstd's encoder is in codec_zstd_compress.cpp, so that nothing here references it.
#include "fatpack/core/codec.hpp"

#include "fatpack/core/thread_pool.hpp"
#include "format/codec_blocks.hpp"

#include <lz4.h>
#include <lz4hc.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

namespace fatpack::core {
namespace detail {
namespace {

void write_u32(std::uint8_t* p, std::uint32_t v) {
  p[0] = std::uint8_t(v);
  p[1] = std::uint8_t(v >> 8);
  p[2] = std::uint8_t(v >> 16);
  p[3] = std::uint8_t(v >> 24);
}

std::size_t lz4_block(const std::uint8_t* src, std::size_t len, int level, std::vector<std::uint8_t>& out,
                      std::string& failure) {
  out.resize(std::size_t(LZ4_compressBound(int(len))));
  const int produced = LZ4_compress_HC(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(out.data()),
                                       int(len), int(out.size()), level);
  if (produced == 0) failure = "LZ4_compress_HC failed";
  return std::size_t(produced);
}

}  // namespace

status normalize_block_size(codec c, std::uint32_t& block_size) {
  if (block_size == 0) block_size = default_block_size(c);
  if (block_size > max_block_size)
    return make_error(errc::invalid_argument, "block size " + std::to_string(block_size) + " exceeds 1 GiB");
  return {};
}

result<std::vector<std::uint8_t>> compress_blocks(codec c, int level, std::uint32_t block_size, byte_span raw,
                                                  block_compressor fn) {
  const std::uint64_t n = block_count(raw.size, block_size);
  std::vector<std::vector<std::uint8_t>> blocks(n);
  std::vector<std::string> failures(n);
  parallel_for(n, std::thread::hardware_concurrency(), [&](std::size_t i) {
    const std::uint8_t* src = raw.data + i * std::uint64_t(block_size);
    const std::size_t len = std::size_t(std::min<std::uint64_t>(block_size, raw.size - i * std::uint64_t(block_size)));
    std::vector<std::uint8_t>& out = blocks[i];
    const std::size_t produced = fn(src, len, level, out, failures[i]);
    // A block that does not shrink is stored raw; the reader knows it by stored size == raw size.
    if (produced == 0 || produced >= len) {
      out.assign(src, src + len);
    } else {
      out.resize(produced);
    }
  });
  for (std::size_t i = 0; i < n; ++i)
    if (!failures[i].empty())
      return make_error(errc::codec, std::string(codec_name(c)) + " compression of block " + std::to_string(i) +
                                         " failed: " + failures[i]);

  std::uint64_t total = 4 * n;
  for (auto& b : blocks) total += b.size();
  std::vector<std::uint8_t> payload(std::size_t(total), 0);
  std::size_t pos = 4 * std::size_t(n);
  for (std::size_t i = 0; i < n; ++i) {
    write_u32(payload.data() + 4 * i, std::uint32_t(blocks[i].size()));
    std::memcpy(payload.data() + pos, blocks[i].data(), blocks[i].size());
    pos += blocks[i].size();
  }
  return payload;
}

}  // namespace detail

result<std::vector<std::uint8_t>> compress_lz4(int level, std::uint32_t block_size, byte_span raw) {
  if (auto s = detail::normalize_block_size(codec::lz4, block_size); !s) return s.error();
  if (level < 0) level = default_level(codec::lz4);
  if (level < 1 || level > LZ4HC_CLEVEL_MAX)
    return make_error(errc::invalid_argument, "lz4 level " + std::to_string(level) + " is outside 1.." +
                                                  std::to_string(LZ4HC_CLEVEL_MAX));
  return detail::compress_blocks(codec::lz4, level, block_size, raw, detail::lz4_block);
}

}  // namespace fatpack::core
