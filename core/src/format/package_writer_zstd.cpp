// write_package: the package writer with compress() (every codec, zstd's encoder included). Apart from
// package_writer.cpp so that the runtime (write_package_lz4) never links zstd's encoder.
#include "fatpack/core/package_writer.hpp"

#include "format/package_writer_impl.hpp"

namespace fatpack::core {

result<std::vector<std::uint8_t>> write_package(const std::string& name, const std::vector<entry_input>& entries,
                                                const pack_options& options) {
  return detail::write_package_using(name, entries, options, compress);
}

}  // namespace fatpack::core
