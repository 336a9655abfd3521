// compress() for every codec, with zstd's encoder (ZSTD_compress, ZSTD_maxCLevel): what package
// writers use. Apart from codec_compress.cpp so that a program that only writes LZ4 (the runtime's
// cache: compress_lz4) links zstd's decoder alone.
#include "fatpack/core/codec.hpp"

#include "format/codec_blocks.hpp"

#include <zstd.h>

#include <string>

namespace fatpack::core {
namespace {

std::size_t zstd_block(const std::uint8_t* src, std::size_t len, int level, std::vector<std::uint8_t>& out,
                       std::string& failure) {
  out.resize(ZSTD_compressBound(len));
  const std::size_t produced = ZSTD_compress(out.data(), out.size(), src, len, level);
  if (ZSTD_isError(produced)) {
    failure = ZSTD_getErrorName(produced);
    return 0;
  }
  return produced;
}

}  // namespace

result<std::vector<std::uint8_t>> compress(codec c, int level, std::uint32_t block_size, byte_span raw) {
  if (c == codec::none) return std::vector<std::uint8_t>(raw.begin(), raw.end());
  if (c == codec::lz4) return compress_lz4(level, block_size, raw);
  if (auto s = detail::normalize_block_size(c, block_size); !s) return s.error();
  if (level < 0) level = default_level(c);
  if (level < 1 || level > ZSTD_maxCLevel())
    return make_error(errc::invalid_argument, "zstd level " + std::to_string(level) + " is outside 1.." +
                                                  std::to_string(ZSTD_maxCLevel()));
  return detail::compress_blocks(c, level, block_size, raw, zstd_block);
}

}  // namespace fatpack::core
