// The package writer with its payload compressor as a parameter: package_writer.cpp (write_package_lz4,
// none or LZ4) and package_writer_zstd.cpp (write_package, any codec) share it, so that only the
// second references zstd's encoder. Internal to core/src/format.
#pragma once

#include "fatpack/core/codec.hpp"
#include "fatpack/core/package_writer.hpp"

namespace fatpack::core::detail {

using payload_compressor = result<std::vector<std::uint8_t>> (*)(codec c, int level, std::uint32_t block_size,
                                                                 byte_span raw);
// `head_only`: the bytes before the first payload only (write_package_head).
result<std::vector<std::uint8_t>> write_package_using(const std::string& name, const std::vector<entry_input>& entries,
                                                      const pack_options& options, payload_compressor compress,
                                                      bool head_only = false);

}  // namespace fatpack::core::detail
