// Writing fatpack packages (docs/format.md). Output is deterministic: same inputs, same bytes.
#pragma once

#include "fatpack/core/codec.hpp"
#include "fatpack/core/error.hpp"
#include "fatpack/core/package.hpp"
#include "fatpack/core/target.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace fatpack::core {

// One image to store: raw (uncompressed) bytes plus what the reader will report about it.
struct entry_input {
  core::target target;
  core::ptx_isa ptx_isa;
  std::uint32_t toolkit_version = 0;
  std::string module_name;
  std::string options;
  std::vector<std::string> kernels;
  std::vector<std::uint8_t> raw;
  // Bytes read instead of `raw` when set: borrowed from a caller that packs them at once and keeps
  // them alive until write_package returns (import_input with input_bytes::borrow: add_image, whose
  // image is then copied once, into the package, instead of twice).
  byte_span borrowed;
  byte_span bytes() const { return borrowed.data ? borrowed : byte_span(raw); }
  // XXH3 of bytes(), where the caller has checked it already (a cache hit's cubin, checked against
  // its entry): the writer takes it instead of hashing the bytes again. 0: the writer hashes.
  std::uint64_t known_xxh3 = 0;
  std::string origin;  // where it came from ("k.cubin", "app.fatbin: entry 2"), for messages only
  // Link group (docs/format.md §4.1): 0/0 for a standalone entry; part k of n relocatable PTX images
  // that the runtime JIT-links together. A group's parts are given consecutively, in part order.
  std::uint16_t link_part = 0;
  std::uint16_t link_parts = 0;
  // Format 1.2 (docs/format.md §4.2): how this PTX entry splits into pieces (import_input fills it
  // for PTX it can split); written only for a standalone PTX entry.
  piece_plan plan;
};

struct pack_options {
  core::codec codec = codec::lz4;
  int level = -1;               // -1: default_level(codec)
  std::uint32_t block_size = 0; // 0: default_block_size(codec)
};

// Builds a package. Entries are written in the given order. Fails on duplicate (target, ptx_isa,
// module, link part) entries, a malformed link group, a name longer than the format allows, or a compression error.
// Links zstd's encoder (package_writer_zstd.cpp): for the CLI and other writers.
result<std::vector<std::uint8_t>> write_package(const std::string& name, const std::vector<entry_input>& entries,
                                                const pack_options& options);
// The same for options.codec none or lz4 only (zstd: invalid_argument), without zstd's encoder: what
// the runtime uses (add_image), so that the runtime links zstd's decoder alone.
result<std::vector<std::uint8_t>> write_package_lz4(const std::string& name, const std::vector<entry_input>& entries,
                                                    const pack_options& options);

// The first bytes of the one-entry, codec-none package write_package_lz4 makes of `entry`: its
// header, entry table and strings, up to the payload (whose offset is the returned size). That head,
// then the entry's bytes, then zeros up to a multiple of 64 are that package, byte for byte: a
// caller that has the entry's bytes in memory with room before them (the runtime, for a mapped cache
// hit: registry add_image_in_place) makes the package around them without copying them.
result<std::vector<std::uint8_t>> write_package_head(const std::string& name, const entry_input& entry);

}  // namespace fatpack::core
