// Names for images handed in through the one-line ports (fatpackModuleLoadData and the like), which
// get no name from their caller: one name per distinct image, so that loading the same bytes again
// shares the first load, and different bytes never do.
//
// Why the bytes are kept and compared: the name starts from a 64-bit XXH3 of the image and its size,
// and XXH3 does not resist collisions made on purpose. Two different images with the same hash and
// size would otherwise share one package, and a program that loads images from several sources would
// run one source's code for another's. So each name keeps a copy of its image's bytes, and a hash match
// counts only when the bytes are equal too; a different image with a colliding hash gets the next name
// ("image-<hash>-<size>.1", ".2", ...). The copies live as long as the process, as the registry's
// packages made from them do.
#pragma once

#include "fatpack/core/hex.hpp"

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fatpack::detail {

class image_names {
 public:
  struct answer {
    std::string name;
    bool is_new = false;  // the caller must register the image under `name`, then call keep()
  };

  // The name of `bytes` (`size` bytes; `hash` their XXH3-64). Not thread-safe: the caller locks.
  answer name_of(const std::uint8_t* bytes, std::size_t size, std::uint64_t hash) const {
    const std::string base = base_name(size, hash);
    auto it = kept_.find(base);
    if (it == kept_.end()) return {base, true};
    const auto& copies = it->second;
    for (std::size_t i = 0; i < copies.size(); ++i)
      if (copies[i].size() == size && std::memcmp(copies[i].data(), bytes, size) == 0) return {name_at(base, i), false};
    return {name_at(base, copies.size()), true};
  }

  // Records `bytes` as the image registered under the name name_of() gave (is_new).
  void keep(const std::uint8_t* bytes, std::size_t size, std::uint64_t hash) {
    kept_[base_name(size, hash)].emplace_back(bytes, bytes + size);
  }

 private:
  static std::string base_name(std::size_t size, std::uint64_t hash) {
    return "image-" + core::hex_bytes(reinterpret_cast<const std::uint8_t*>(&hash), sizeof hash) + "-" +
           std::to_string(size);
  }
  static std::string name_at(const std::string& base, std::size_t i) {
    return i == 0 ? base : base + "." + std::to_string(i);
  }
  std::map<std::string, std::vector<std::vector<std::uint8_t>>> kept_;
};

}  // namespace fatpack::detail
