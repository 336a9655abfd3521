// Reading fatpack packages (.fpk, docs/format.md). This is the only code that parses package bytes.
//
// package_view::parse validates the header, the entry table and the string table (every offset and
// size, the tables' XXH3, zero padding) before anything is returned. Payloads are checked when they
// are decompressed (raw XXH3). Errors name the source, the entry and the field.
#pragma once

#include "fatpack/core/codec.hpp"
#include "fatpack/core/error.hpp"
#include "fatpack/core/target.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fatpack::core {

inline constexpr std::uint8_t package_magic[8] = {0x89, 'F', 'P', 'K', '\r', '\n', 0x1A, '\n'};
inline constexpr std::uint16_t format_major = 1;
inline constexpr std::uint16_t format_minor = 2;  // 1.1: link groups (§4.1); 1.2: piece plans (§4.2)
// What writers put in version_minor: 0 unless the package holds a link group (1) or a piece plan (2),
// so that a package without them stays byte-identical to what v1.0 writers wrote.
inline constexpr std::uint16_t format_minor_plain = 0;
inline constexpr std::uint16_t format_minor_link_groups = 1;
inline constexpr std::uint16_t format_minor_piece_plans = 2;

// Kernel-granular JIT (docs/format.md §4.2, docs/splitting.md): how a PTX entry splits into
// independent pieces, recorded at pack time so that a reader compiles one piece without splitting
// the module again. A piece's text is the entry's raw bytes [0, header_end), then each range
// (core::assemble_ptx_piece); `xxh3` and `size` are of that text.
struct piece_plan_piece {
  std::uint64_t xxh3 = 0, size = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // [first, second) of the raw PTX
  std::vector<std::uint32_t> kernels;                            // indexes into the entry's kernel list
  std::vector<std::string> globals;  // module-scope state it defines (cuModuleGetGlobal names)
};
struct piece_plan {
  std::uint64_t header_end = 0;
  std::vector<piece_plan_piece> pieces;  // none, or two or more
  bool empty() const { return pieces.empty(); }
};
inline constexpr std::uint32_t header_size_v1 = 128;
inline constexpr std::uint32_t entry_size_v1 = 128;
inline constexpr std::uint32_t payload_alignment = 64;

struct entry_info {
  std::size_t index = 0;
  core::target target;
  core::ptx_isa ptx_isa;              // PTX only
  std::uint32_t toolkit_version = 0;  // producing CUDA toolkit, 13000 = 13.0; 0 = unknown
  core::codec codec = codec::none;
  std::uint32_t block_size = 0;
  std::uint64_t payload_offset = 0;   // from the start of the package
  std::uint64_t stored_size = 0;
  std::uint64_t raw_size = 0;
  std::uint64_t raw_xxh3 = 0;
  std::uint64_t stored_xxh3 = 0;      // of the stored (compressed) payload
  std::string_view module_name;       // views into the package bytes
  std::string_view options;           // JIT/ptxas options the entry was built with (may be empty)
  std::vector<std::string_view> kernels;
  // Link group (format 1.1, docs/format.md §4.1): link_parts 0 for a standalone entry; otherwise this
  // entry is part link_part of link_parts consecutive relocatable PTX entries that are JIT-linked
  // together as one module. Selection sees the group as its first part.
  std::uint16_t link_part = 0;
  std::uint16_t link_parts = 0;
  // Format 1.2 (§4.2): the entry's piece plan; empty when it has none.
  piece_plan plan;
  bool in_link_group() const { return link_parts != 0; }
  // Whether selection lists this entry: a standalone entry or the first part of a group.
  bool selectable() const { return link_part == 0; }

  // "entry 3 (sm_90 sass)": how errors name an entry.
  std::string describe() const;
};

class package_view {
 public:
  // Parses one package starting at bytes.data; `source` names it in errors ("app.fpk",
  // "app.fpk+0x4c0"). Bytes past the package's total_size are ignored.
  static result<package_view> parse(byte_span bytes, std::string_view source);

  std::string_view source() const { return source_; }
  std::string_view name() const { return name_; }
  std::uint16_t version_major() const { return major_; }
  std::uint16_t version_minor() const { return minor_; }
  std::uint64_t total_size() const { return total_size_; }
  byte_span bytes() const { return bytes_; }
  const std::vector<entry_info>& entries() const { return entries_; }

  byte_span stored_payload(std::size_t i) const;

  // Decompresses entry i (on up to `threads` threads for entries of several blocks), checking the
  // stored XXH3 before decoding and the raw XXH3 of the result. Every reader (verify, extract, the
  // runtime's SASS and PTX paths) goes through here, so they accept exactly the same packages: a
  // forged package with an intact stored hash but a wrong raw hash is refused at load time too.
  result<std::vector<std::uint8_t>> decompress(std::size_t i, unsigned threads = 1) const;
  // The first of those checks alone: entry i's stored bytes against stored_xxh3. For a reader that
  // may not decode the entry at all (the JIT, when the entry's key was compiled before), so it still
  // refuses the packages verify refuses.
  status check_stored(std::size_t i) const;
  status decompress_into(std::size_t i, std::uint8_t* out, unsigned threads = 1) const;
  // Decompresses and checks every entry.
  status verify() const;

 private:
  byte_span bytes_;
  std::string source_;
  std::string_view name_;
  std::uint16_t major_ = 0, minor_ = 0;
  std::uint64_t total_size_ = 0;
  std::vector<entry_info> entries_;
};

// The one walker of packages concatenated back to back (docs/format.md §2), for files, embedded
// blobs and memory alike: each package starts at the previous one's total_size (a multiple of 64);
// after at least one package, a tail of zero bytes only ends the list (alignment padding an
// embedder or linker added); anything else must be a valid package, or the walk fails with its
// error. Empty input is an error. Two packages of one name are an error naming both (see
// check_unique_names). Calls fn for each package in order; an error from fn stops the walk.
status for_each_package(byte_span bytes, std::string_view source, const std::function<status(package_view&&)>& fn);
// The name rule of for_each_package for packages found otherwise (find_embedded_packages): an error
// naming both places when two packages share a name.
status check_unique_names(const std::vector<package_view>& packages);
// for_each_package, collected.
result<std::vector<package_view>> parse_packages(byte_span bytes, std::string_view source);

// Finds packages embedded anywhere in a larger file (an executable, object or archive): scans for the
// magic at 8-byte aligned offsets (in an ar archive: aligned within each member, whose data ar puts
// at any even offset; an archive whose member headers do not parse is scanned as one run of bytes)
// and keeps each hit whose header and tables validate. Returns the
// offsets of valid packages; `skipped` (optional) receives errors of magic hits that did not validate.
// Linear in the input: a hit whose header declares a plausible total_size claims those bytes whether
// it validates or not, and the scan resumes after them. `work` (optional, for tests) receives the
// bytes the candidates' parses could examine in all, at most bytes.size plus 8 per magic hit.
std::vector<std::uint64_t> find_embedded_packages(byte_span bytes, std::vector<error>* skipped = nullptr,
                                                  std::uint64_t* work = nullptr);

}  // namespace fatpack::core
