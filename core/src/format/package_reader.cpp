// The one parser of package bytes (docs/format.md). Policy, after LLVM's OffloadBinary: check every
// offset and size against the bytes actually present before using it, check every byte that is not
// data (padding, reserved fields of this version) for zero, and report the first problem as a value
// naming the source, the entry and the field. Nothing here reads outside `bytes`.
#include "fatpack/core/package.hpp"
#include "fatpack/core/hex.hpp"

#include "format/link_groups.hpp"
#include "format/package_layout.hpp"
#include "format/piece_plan.hpp"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

namespace fatpack::core {
namespace {

using namespace layout;

bool all_zero(const std::uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

// Resolves a (offset, size) reference into the string table; the string must be followed by a NUL.
bool string_ref(byte_span table, std::uint32_t off, std::uint32_t size, std::string_view* out) {
  if (std::uint64_t(off) + size >= table.size) return false;
  if (table.data[std::uint64_t(off) + size] != 0) return false;
  *out = std::string_view(reinterpret_cast<const char*>(table.data) + off, size);
  return true;
}

}  // namespace

std::string entry_info::describe() const {
  std::string s = "entry " + std::to_string(index) + " (" + target.str();
  if (!module_name.empty()) s += ", module '" + std::string(module_name) + "'";
  return s + ")";
}

result<package_view> package_view::parse(byte_span bytes, std::string_view source) {
  const std::string src(source);
  auto fail = [&](errc code, const std::string& what) { return make_error(code, src + ": " + what); };

  if (bytes.size < 16 || std::memcmp(bytes.data, package_magic, sizeof package_magic) != 0)
    return fail(bytes.size < sizeof package_magic ? errc::truncated : errc::bad_magic,
                "not a fatpack package (bad magic)");
  const std::uint8_t* h = bytes.data;
  const std::uint16_t major = get16(h + h_major), minor = get16(h + h_minor);
  if (major != format_major)
    return fail(errc::unsupported_version, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                                               " is not supported (this fatpack reads " + std::to_string(format_major) +
                                               ".x)");
  if (bytes.size < h_reserved) return fail(errc::truncated, "header truncated (" + std::to_string(bytes.size) + " bytes)");
  const std::uint32_t header_size = get32(h + h_header_size);
  const std::uint64_t total = get64(h + h_total_size);
  if (header_size < header_size_v1 || header_size % 8)
    return fail(errc::malformed, "header_size " + std::to_string(header_size) + " is invalid (at least " +
                                     std::to_string(header_size_v1) + ", a multiple of 8)");
  if (total < header_size || total % payload_alignment)
    return fail(errc::malformed, "total_size " + std::to_string(total) + " is invalid");
  if (total > bytes.size)
    return fail(errc::truncated, "total_size " + std::to_string(total) + " runs past the end of the data (" +
                                     std::to_string(bytes.size) + " bytes): truncated");
  // From here on every read stays below `total`.
  const std::uint64_t entry_offset = get64(h + h_entry_offset);
  const std::uint32_t entry_count = get32(h + h_entry_count);
  const std::uint32_t entry_size = get32(h + h_entry_size);
  const std::uint64_t string_offset = get64(h + h_string_offset);
  const std::uint64_t string_size = get64(h + h_string_size);
  if (entry_size < entry_size_v1 || entry_size % 8)
    return fail(errc::malformed, "entry_size " + std::to_string(entry_size) + " is invalid");
  if (entry_offset != header_size)
    return fail(errc::malformed, "entry_offset " + std::to_string(entry_offset) + " does not follow the header");
  const std::uint64_t entry_end = entry_offset + std::uint64_t(entry_count) * entry_size;  // < 2^32 * 2^32 + 2^64? bounded below
  if (entry_count > total / entry_size || entry_end > total)
    return fail(errc::malformed, "entry table (" + std::to_string(entry_count) + " x " + std::to_string(entry_size) +
                                     " bytes) runs past total_size " + std::to_string(total));
  if (string_offset != entry_end || string_size > total - string_offset)
    return fail(errc::malformed, "string table (offset " + std::to_string(string_offset) + ", size " +
                                     std::to_string(string_size) + ") is out of place or past total_size");
  const std::uint64_t tables_end = string_offset + string_size;

  // Checksum over header + entry table + string table, with the checksum field read as zero.
  {
    XXH3_state_t* st = XXH3_createState();
    static const std::uint8_t zeros[8] = {};
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, h, h_tables_xxh3);
    XXH3_64bits_update(st, zeros, 8);
    XXH3_64bits_update(st, h + h_tables_xxh3 + 8, std::size_t(tables_end - h_tables_xxh3 - 8));
    const std::uint64_t got = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    const std::uint64_t want = get64(h + h_tables_xxh3);
    if (got != want)
      return fail(errc::checksum, "header/table checksum mismatch (stored " + hex(want) + ", computed " + hex(got) + ")");
  }
  // Fields this reader does not know must be zero in a package of its own minor version; a newer
  // minor version may use them and still reads.
  const bool same_minor = minor <= format_minor;
  if (same_minor && (get64(h + h_flags) != 0 || !all_zero(h + h_reserved, header_size - h_reserved)))
    return fail(errc::malformed, "reserved header fields are not zero");

  package_view pv;
  pv.bytes_ = bytes.subspan(0, std::size_t(total));
  pv.source_ = src;
  pv.major_ = major;
  pv.minor_ = minor;
  pv.total_size_ = total;
  const byte_span strings = bytes.subspan(std::size_t(string_offset), std::size_t(string_size));
  if (!string_ref(strings, get32(h + h_name_offset), get32(h + h_name_size), &pv.name_) || pv.name_.empty())
    return fail(errc::malformed, "package name reference is out of range");

  std::uint64_t next_payload = align_up(tables_end, payload_alignment);
  std::uint64_t zero_from = tables_end;  // start of the current run of bytes that must be zero
  pv.entries_.reserve(entry_count);
  for (std::uint32_t i = 0; i < entry_count; ++i) {
    const std::uint8_t* r = h + entry_offset + std::uint64_t(i) * entry_size;
    entry_info e;
    e.index = i;
    const std::string where = "entry " + std::to_string(i);
    auto efail = [&](errc code, const std::string& what) { return fail(code, where + ": " + what); };
    const std::uint8_t kind = r[e_kind], variant = r[e_variant], cdc = r[e_codec];
    if (kind < 1 || kind > 3) return efail(errc::unknown_kind, "unknown kind " + std::to_string(kind));
    if (variant > 2) return efail(errc::malformed, "unknown arch variant " + std::to_string(variant));
    if (cdc > 2) return efail(errc::malformed, "unknown codec " + std::to_string(cdc));
    e.target.kind = entry_kind(kind);
    e.target.variant = arch_variant(variant);
    e.target.arch = get32(r + e_arch);
    if (e.target.arch < 10 || e.target.arch > 9999)
      return efail(errc::malformed, "arch " + std::to_string(e.target.arch) + " is out of range");
    if (!string_ref(strings, get32(r + e_module_offset), get32(r + e_module_size), &e.module_name) ||
        e.module_name.empty())
      return efail(errc::malformed, "module name reference is out of range");
    const std::string where2 = e.describe();
    auto ffail = [&](errc code, const std::string& what) { return fail(code, where2 + ": " + what); };
    e.ptx_isa = {get16(r + e_isa_major), get16(r + e_isa_minor)};
    e.toolkit_version = get32(r + e_toolkit);
    e.codec = codec(cdc);
    e.payload_offset = get64(r + e_payload_offset);
    e.stored_size = get64(r + e_stored_size);
    e.raw_size = get64(r + e_raw_size);
    e.raw_xxh3 = get64(r + e_raw_xxh3);
    e.stored_xxh3 = get64(r + e_stored_xxh3);
    e.block_size = get32(r + e_block_size);
    // v1.0 reserves everything from 0x58; v1.1 uses 0x58..0x5B for the link group, v1.2 0x5C..0x63
    // for the piece plan.
    const std::size_t reserved_from = minor >= format_minor_piece_plans  ? e_reserved_v1_2
                                      : minor >= format_minor_link_groups ? e_reserved_v1_1
                                                                          : e_reserved;
    if (same_minor && (r[e_reserved0] != 0 || !all_zero(r + reserved_from, entry_size - reserved_from)))
      return ffail(errc::malformed, "reserved entry fields are not zero");
    if (minor >= format_minor_link_groups) {
      e.link_part = get16(r + e_link_part);
      e.link_parts = get16(r + e_link_parts);
    }
    if (e.payload_offset % payload_alignment || e.payload_offset < next_payload)
      return ffail(errc::malformed, "payload_offset " + std::to_string(e.payload_offset) +
                                        " is not 64-byte aligned or overlaps the tables or the previous payload");
    if (e.payload_offset > total || e.stored_size > total - e.payload_offset)
      return ffail(errc::malformed, "payload (offset " + std::to_string(e.payload_offset) + ", stored_size " +
                                        std::to_string(e.stored_size) + ") runs past total_size " + std::to_string(total));
    if (e.codec == codec::none) {
      if (e.block_size != 0 || e.stored_size != e.raw_size)
        return ffail(errc::malformed, "codec none needs block_size 0 and stored_size == raw_size");
    } else {
      if (e.block_size == 0) return ffail(errc::malformed, "block_size is 0 for a compressed entry");
      if (e.block_size > max_block_size)
        return ffail(errc::malformed, "block_size " + std::to_string(e.block_size) + " exceeds 1 GiB (the writers' limit)");
      // Each block costs a 4-byte size in the payload, so raw_size <= stored_size / 4 * block_size:
      // a forged raw_size is bounded by the package's size times at most 2^28, not by nothing. That is
      // still more than memory can hold, so the callers that allocate raw_size handle the failure
      // (decompress() returns an error value; the runtime's JIT turns a bad_alloc into the load's error).
      const std::uint64_t blocks = e.raw_size == 0 ? 0 : (e.raw_size - 1) / e.block_size + 1;
      if (blocks > e.stored_size / 4)
        return ffail(errc::malformed, "raw_size " + std::to_string(e.raw_size) + " needs " + std::to_string(blocks) +
                                          " blocks, more than stored_size " + std::to_string(e.stored_size) + " can hold");
      // No decoder can expand its input more than the codec's format allows, so a raw_size beyond
      // that is forged; this keeps what a small package can make a reader allocate small (a 1.4 KB
      // package could declare a 1 TiB entry before).
      const std::uint64_t data = e.stored_size - 4 * blocks, ratio = max_expansion(e.codec);
      if (data < e.raw_size / ratio + (e.raw_size % ratio != 0))
        return ffail(errc::malformed, "raw_size " + std::to_string(e.raw_size) + " is more than " +
                                          std::string(codec_name(e.codec)) + " can decode from " +
                                          std::to_string(data) + " stored bytes (at most " + std::to_string(ratio) +
                                          "x)");
    }
    if (!string_ref(strings, get32(r + e_options_offset), get32(r + e_options_size), &e.options))
      return ffail(errc::malformed, "options reference is out of range");
    const std::uint32_t k_off = get32(r + e_kernels_offset), k_size = get32(r + e_kernels_size),
                        k_count = get32(r + e_kernel_count);
    if (k_size == 0) {
      if (k_count != 0) return ffail(errc::malformed, "kernel_count is set but the kernel list is empty");
    } else {
      std::string_view all;
      if (!string_ref(strings, k_off, k_size - 1, &all))
        return ffail(errc::malformed, "kernel list reference is out of range");
      std::size_t start = 0;
      for (std::size_t p = 0; p <= all.size(); ++p) {
        if (p == all.size() || all[p] == '\0') {
          if (p == start) return ffail(errc::malformed, "kernel list holds an empty name");
          e.kernels.push_back(all.substr(start, p - start));
          start = p + 1;
        }
      }
      if (e.kernels.size() != k_count)
        return ffail(errc::malformed, "kernel_count " + std::to_string(k_count) + " but the list holds " +
                                          std::to_string(e.kernels.size()) + " names");
    }
    if (minor >= format_minor_piece_plans) {
      const std::uint32_t plan_offset = get32(r + e_plan_offset), plan_size = get32(r + e_plan_size);
      if (plan_size == 0) {
        // No plan: the offset refers to nothing and must be zero, as the writers leave it.
        if (plan_offset != 0)
          return ffail(errc::malformed, "plan_offset is " + std::to_string(plan_offset) + " but plan_size is 0 (must be 0)");
      } else {
        std::string_view plan;
        if (!string_ref(strings, plan_offset, plan_size, &plan))
          return ffail(errc::malformed, "piece plan reference is out of range");
        if (e.target.kind != entry_kind::ptx || e.in_link_group())
          return ffail(errc::malformed, "a piece plan on an entry that is not standalone PTX");
        if (std::string bad = detail::decode_piece_plan(plan, e.raw_size, e.kernels, e.plan); !bad.empty())
          return ffail(errc::malformed, bad);
      }
    }
    if (!all_zero(h + zero_from, std::size_t(e.payload_offset - zero_from)))
      return ffail(errc::malformed, "padding before the payload is not zero");
    zero_from = e.payload_offset + e.stored_size;
    next_payload = align_up(zero_from, payload_alignment);
    pv.entries_.push_back(std::move(e));
  }
  if (!all_zero(h + zero_from, std::size_t(total - zero_from)))
    return fail(errc::malformed, "padding at the end of the package is not zero");
  {
    std::vector<detail::link_member> members;
    members.reserve(pv.entries_.size());
    for (const auto& e : pv.entries_)
      members.push_back({e.link_part, e.link_parts, e.target, e.ptx_isa, e.module_name, e.options});
    if (auto bad = detail::check_link_groups(members); !bad.why.empty())
      return fail(errc::malformed, pv.entries_[bad.entry].describe() + ": " + bad.why);
  }
  return pv;
}

byte_span package_view::stored_payload(std::size_t i) const {
  const entry_info& e = entries_.at(i);
  return bytes_.subspan(std::size_t(e.payload_offset), std::size_t(e.stored_size));
}

status package_view::check_stored(std::size_t i) const {
  const entry_info& e = entries_.at(i);
  const std::uint64_t stored_hash = xxh3(stored_payload(i));
  if (stored_hash != e.stored_xxh3)
    return make_error(errc::checksum, source_ + ": " + e.describe() + ": stored payload checksum mismatch (stored " +
                                          hex(e.stored_xxh3) + ", computed " + hex(stored_hash) + ")");
  return {};
}

status package_view::decompress_into(std::size_t i, std::uint8_t* out, unsigned threads) const {
  const entry_info& e = entries_.at(i);
  auto fail = [&](errc code, const std::string& what) {
    return make_error(code, source_ + ": " + e.describe() + ": " + what);
  };
  const byte_span stored = stored_payload(i);
  // The stored hash catches damage before a decoder sees the bytes; the raw hash proves the result.
  if (auto s = check_stored(i); !s) return s;
  status st = core::decompress(e.codec, e.block_size, stored, out, e.raw_size, threads);
  if (!st) return fail(st.error().reason, std::string(codec_name(e.codec)) + ": " + st.error().message);
  const std::uint64_t raw_hash = xxh3(byte_span(out, std::size_t(e.raw_size)));
  if (raw_hash != e.raw_xxh3)
    return fail(errc::checksum, "raw data checksum mismatch (stored " + hex(e.raw_xxh3) + ", computed " +
                                    hex(raw_hash) + ")");
  return {};
}

result<std::vector<std::uint8_t>> package_view::decompress(std::size_t i, unsigned threads) const {
  std::vector<std::uint8_t> out;
  try {
    out.resize(std::size_t(entries_.at(i).raw_size));
  } catch (const std::exception&) {  // bad_alloc, length_error: a raw_size memory cannot hold
    return make_error(errc::malformed, source_ + ": " + entries_.at(i).describe() + ": raw_size " +
                                           std::to_string(entries_.at(i).raw_size) + " bytes cannot be allocated");
  }
  status st = decompress_into(i, out.data(), threads);
  if (!st) return st.error();
  return out;
}

status package_view::verify() const {
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    auto r = decompress(i);
    if (!r) return r.error();
  }
  return {};
}

namespace {

// Two packages of one name in one file would make every module of that name unloadable (the
// registry keeps both and cannot tell them apart, and naming the package does not help), so the
// second is refused with both places named.
status refuse_duplicate_name(const std::vector<std::pair<std::string, std::string>>& seen, const package_view& pv) {
  for (const auto& [name, where] : seen)
    if (name == pv.name())
      return make_error(errc::malformed, std::string(pv.source()) + ": a second package named '" + name + "' (the first is " +
                                             where + "): package names must be unique in one file");
  return {};
}

}  // namespace

status for_each_package(byte_span bytes, std::string_view source, const std::function<status(package_view&&)>& fn) {
  if (bytes.size == 0) return make_error(errc::truncated, std::string(source) + ": empty file");
  std::uint64_t off = 0;
  std::vector<std::pair<std::string, std::string>> seen;  // name, where
  while (off < bytes.size) {
    // After a package, a tail of zero bytes only (an embedder's or linker's alignment) ends the list.
    if (!seen.empty() && all_zero(bytes.data + off, std::size_t(bytes.size - off))) break;
    const std::string where = off == 0 ? std::string(source) : std::string(source) + "+" + hex(off);
    auto pv = package_view::parse(bytes.subspan(std::size_t(off), std::size_t(bytes.size - off)), where);
    if (!pv) return pv.error();
    if (auto st = refuse_duplicate_name(seen, *pv); !st) return st;
    seen.emplace_back(std::string(pv->name()), where);
    off += pv->total_size();  // a multiple of 64 and at least the header: the walk always advances
    if (auto st = fn(std::move(pv).value()); !st) return st;
  }
  return {};
}

status check_unique_names(const std::vector<package_view>& packages) {
  std::vector<std::pair<std::string, std::string>> seen;
  for (const auto& pv : packages) {
    if (auto st = refuse_duplicate_name(seen, pv); !st) return st;
    seen.emplace_back(std::string(pv.name()), std::string(pv.source()));
  }
  return {};
}

result<std::vector<package_view>> parse_packages(byte_span bytes, std::string_view source) {
  std::vector<package_view> out;
  if (auto st = for_each_package(bytes, source, [&](package_view&& pv) {
        out.push_back(std::move(pv));
        return status{};
      });
      !st)
    return st.error();
  return out;
}

namespace {

// The scan of find_embedded_packages over one run of bytes whose offset 0 is the alignment base (a
// file, or one member of an ar archive); offsets are appended relative to `bytes`, plus `base`.
void scan_aligned(byte_span bytes, std::uint64_t base, std::vector<std::uint64_t>& found,
                  std::vector<error>* skipped, std::uint64_t& steps) {
  std::uint64_t off = 0;
  while (off + sizeof package_magic <= bytes.size) {
    // memchr for the first magic byte, then align: quicker than testing every 8-byte slot.
    const void* hit = std::memchr(bytes.data + off, package_magic[0], std::size_t(bytes.size - off));
    if (!hit) break;
    std::uint64_t pos = std::uint64_t(static_cast<const std::uint8_t*>(hit) - bytes.data);
    if (pos % 8) {
      off = pos + 1;
      continue;
    }
    if (pos + sizeof package_magic <= bytes.size &&
        std::memcmp(bytes.data + pos, package_magic, sizeof package_magic) == 0) {
      const byte_span rest = bytes.subspan(std::size_t(pos), std::size_t(bytes.size - pos));
      // parse() reads at most the declared total_size (it checks that field before any hashing or
      // padding check), so a candidate costs O(1) when the field is implausible and O(total) else.
      const std::uint64_t declared = rest.size >= layout::h_total_size + 8 ? get64(rest.data + layout::h_total_size) : 0;
      const bool plausible = declared >= header_size_v1 && declared % payload_alignment == 0 && declared <= rest.size;
      steps += plausible ? declared : sizeof package_magic;
      auto pv = package_view::parse(rest, "offset " + hex(base + pos));
      if (pv) {
        found.push_back(base + pos);
        off = pos + pv->total_size();
        continue;
      }
      if (skipped) skipped->push_back(pv.error());
      // Linear, not quadratic: the bytes a failed candidate claimed are not searched again, so every
      // byte is examined by at most one expensive parse (crafted files with a fake header every 64
      // bytes each claiming the rest of the file took seconds per MB). Packages do not overlap, so
      // this only skips packages hidden inside another header's declared extent.
      if (plausible) {
        off = pos + declared;
        continue;
      }
    }
    off = pos + 1;
  }
}

// The members of a System V / GNU ar archive ("!<arch>\n", then per member a 60-byte header whose
// size field is decimal at offset 48, the data, and a pad byte to an even offset). A member's data
// starts at any even offset of the archive, but the sections inside it are aligned relative to the
// member's start, so each member is scanned by itself. A BSD name ("#1/<n>") is the first n bytes of
// the data. Returns false at the first header that does not parse (the rest is not walked).
bool for_each_ar_member(byte_span bytes, const std::function<void(std::uint64_t, byte_span)>& fn) {
  constexpr std::uint64_t header_size = 60;
  std::uint64_t off = 8;
  while (off + header_size <= bytes.size) {
    const std::uint8_t* h = bytes.data + off;
    if (h[58] != '`' || h[59] != '\n') return false;
    std::uint64_t size = 0;
    std::size_t i = 48;
    for (; i < 58 && h[i] >= '0' && h[i] <= '9'; ++i) size = size * 10 + std::uint64_t(h[i] - '0');  // 10 digits fit
    if (i == 48) return false;
    for (; i < 58; ++i)
      if (h[i] != ' ') return false;
    std::uint64_t data = off + header_size;
    if (size > bytes.size - data) return false;
    std::uint64_t name_in_data = 0;
    if (std::memcmp(h, "#1/", 3) == 0) {
      for (std::size_t j = 3; j < 16 && h[j] >= '0' && h[j] <= '9'; ++j) name_in_data = name_in_data * 10 + std::uint64_t(h[j] - '0');
      if (name_in_data > size) return false;
    }
    fn(data + name_in_data, bytes.subspan(std::size_t(data + name_in_data), std::size_t(size - name_in_data)));
    off = data + size + (size & 1);
  }
  return true;
}

}  // namespace

std::vector<std::uint64_t> find_embedded_packages(byte_span bytes, std::vector<error>* skipped, std::uint64_t* work) {
  std::vector<std::uint64_t> found;
  std::uint64_t steps = 0;
  const std::size_t skipped_before = skipped ? skipped->size() : 0;
  const bool ar = bytes.size >= 8 && std::memcmp(bytes.data, "!<arch>\n", 8) == 0;
  if (!ar || !for_each_ar_member(bytes, [&](std::uint64_t base, byte_span member) {
        scan_aligned(member, base, found, skipped, steps);
      })) {
    // Not an archive, or one whose member headers do not parse: the whole file, aligned to its start
    // (packages already found in members are found again; start over).
    found.clear();
    if (skipped) skipped->erase(skipped->begin() + std::ptrdiff_t(skipped_before), skipped->end());
    steps = 0;
    scan_aligned(bytes, 0, found, skipped, steps);
  }
  if (work) *work = steps;
  return found;
}

}  // namespace fatpack::core
