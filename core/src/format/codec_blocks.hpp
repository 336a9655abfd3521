// The blocked payload layout shared by the codecs (docs/format.md §5): codec.cpp reads it,
// codec_compress.cpp writes it. Internal to core/src/format.
#pragma once

#include "fatpack/core/codec.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fatpack::core::detail {

inline std::uint64_t block_count(std::uint64_t raw_size, std::uint32_t block_size) {
  return raw_size == 0 ? 0 : (raw_size + block_size - 1) / block_size;
}

// Compresses one block of `len` bytes into `out` (sized by the callee); returns the bytes produced,
// 0 when it failed (then `failure` says why) or did not fit.
using block_compressor = std::size_t (*)(const std::uint8_t* src, std::size_t len, int level,
                                         std::vector<std::uint8_t>& out, std::string& failure);

// The checks every codec makes first: block_size 0 becomes the codec's default, above
// max_block_size is an error; level < 0 becomes the codec's default.
status normalize_block_size(codec c, std::uint32_t& block_size);
// Splits `raw` into blocks, compresses them in parallel with `fn` (a block that does not shrink is
// stored raw) and lays them out behind the block table.
result<std::vector<std::uint8_t>> compress_blocks(codec c, int level, std::uint32_t block_size, byte_span raw,
                                                  block_compressor fn);

}  // namespace fatpack::core::detail
