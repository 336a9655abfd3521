// Writes format v1 packages (docs/format.md). Deterministic: the same inputs give the same bytes
// (no timestamps, entries in the caller's order, strings deduplicated in first-use order).
#include "fatpack/core/package_writer.hpp"

#include "fatpack/core/package.hpp"
#include "format/link_groups.hpp"
#include "format/package_layout.hpp"
#include "format/piece_plan.hpp"
#include "format/package_writer_impl.hpp"

#include <limits>
#include <map>

#include <sys/mman.h>
#include <set>
#include <tuple>

namespace fatpack::core {
namespace {

// Maps a fresh buffer's pages in one call (MADV_POPULATE_WRITE, Linux 5.14) before it is filled:
// a 1 MB package fills 256 fresh pages, and one fault each costs more than the copy (add_image on a
// fatpack::compile hit). Best effort: an older kernel says EINVAL and the faults happen as before.
void prefault(void* p, std::size_t n) {
#ifdef __linux__
  constexpr int populate_write = 23;  // MADV_POPULATE_WRITE; older headers lack the name
  constexpr std::uintptr_t page = 4096;
  if (n < 64 * page) return;  // small buffers: not worth a system call
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + n) & ~(page - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, populate_write);
#else
  (void)p;
  (void)n;
#endif
}

using namespace layout;

// Strings are stored once, each followed by a NUL so C consumers can use them in place.
class string_table {
 public:
  result<std::pair<std::uint32_t, std::uint32_t>> add(const std::string& s) {
    auto it = index_.find(s);
    if (it != index_.end()) return std::make_pair(it->second, std::uint32_t(s.size()));
    if (bytes_.size() + s.size() + 1 > std::numeric_limits<std::uint32_t>::max())
      return make_error(errc::invalid_argument, "string table exceeds 4 GiB");
    const auto off = std::uint32_t(bytes_.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    bytes_.push_back(0);
    index_.emplace(s, off);
    return std::make_pair(off, std::uint32_t(s.size()));
  }
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
  std::map<std::string, std::uint32_t> index_;
};

}  // namespace

namespace {

result<std::vector<std::uint8_t>> compress_none_or_lz4(codec c, int level, std::uint32_t block_size, byte_span raw) {
  if (c == codec::none) return std::vector<std::uint8_t>(raw.begin(), raw.end());
  if (c == codec::lz4) return compress_lz4(level, block_size, raw);
  return make_error(errc::invalid_argument, std::string("codec ") + codec_name(c) +
                                                " needs write_package (write_package_lz4 writes none or lz4 only)");
}

}  // namespace

result<std::vector<std::uint8_t>> write_package_lz4(const std::string& name, const std::vector<entry_input>& entries,
                                                    const pack_options& options) {
  return detail::write_package_using(name, entries, options, compress_none_or_lz4);
}

result<std::vector<std::uint8_t>> write_package_head(const std::string& name, const entry_input& entry) {
  pack_options opts;
  opts.codec = codec::none;
  return detail::write_package_using(name, {entry}, opts, compress_none_or_lz4, /*head_only=*/true);
}

result<std::vector<std::uint8_t>> detail::write_package_using(const std::string& name,
                                                              const std::vector<entry_input>& entries,
                                                              const pack_options& options, payload_compressor compress,
                                                              bool head_only) {
  if (name.empty()) return make_error(errc::invalid_argument, "package name is empty");
  if (entries.empty()) return make_error(errc::invalid_argument, "package '" + name + "' has no entries");
  if (entries.size() > 1'000'000)
    return make_error(errc::invalid_argument, "package '" + name + "' has too many entries");

  std::set<std::tuple<std::string, entry_kind, std::uint32_t, arch_variant, std::uint16_t, std::uint16_t, std::uint16_t>>
      seen;
  bool link_groups = false;
  std::vector<detail::link_member> members;
  for (const auto& e : entries) {
    if (e.module_name.empty())
      return make_error(errc::invalid_argument, e.origin + ": entry has an empty module name");
    link_groups = link_groups || e.link_parts != 0;
    members.push_back({e.link_part, e.link_parts, e.target, e.ptx_isa, e.module_name, e.options});
    auto key = std::make_tuple(e.module_name, e.target.kind, e.target.arch, e.target.variant, e.ptx_isa.major,
                               e.ptx_isa.minor, e.link_part);
    if (!seen.insert(key).second)
      return make_error(errc::invalid_argument,
                        e.origin + ": module '" + e.module_name + "' already has an entry for " + e.target.str() +
                            (e.target.kind == entry_kind::ptx ? " (PTX ISA " + e.ptx_isa.str() + ")" : std::string()));
  }

  if (auto bad = detail::check_link_groups(members); !bad.why.empty())
    return make_error(errc::invalid_argument, entries[bad.entry].origin + ": " + bad.why);

  string_table strings;
  auto name_ref = strings.add(name);
  if (!name_ref) return std::move(name_ref).error();

  struct prepared {
    std::vector<std::uint8_t> payload;
    std::uint32_t block_size;
    std::pair<std::uint32_t, std::uint32_t> module, opts, kernels, plan{0, 0};
    std::uint32_t kernel_count;
  };
  std::vector<prepared> prep(entries.size());
  bool plans = false;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const entry_input& e = entries[i];
    prepared& p = prep[i];
    p.block_size = options.codec == codec::none ? 0
                   : options.block_size        ? options.block_size
                                               : default_block_size(options.codec);
    // codec none: the raw bytes are the payload, copied once into the package below (registry's
    // add_image packs every fatpack::compile result this way, on the hit path).
    if (options.codec != codec::none) {
      auto payload = compress(options.codec, options.level, p.block_size, e.bytes());
      if (!payload) return make_error(payload.error().reason, e.origin + ": " + payload.error().message);
      p.payload = std::move(payload).value();
    }
    auto m = strings.add(e.module_name);
    auto o = strings.add(e.options);
    if (!m || !o) return make_error(errc::invalid_argument, "string table exceeds 4 GiB");
    p.module = *m;
    p.opts = *o;
    // Kernel names: one run of NUL-terminated names, stored together (not deduplicated).
    std::string joined;
    for (const auto& k : e.kernels) {
      if (k.empty() || k.find('\0') != std::string::npos)
        return make_error(errc::invalid_argument, e.origin + ": invalid kernel name");
      joined += k;
      joined.push_back('\0');
    }
    if (joined.empty()) {
      p.kernels = {0, 0};
    } else {
      joined.pop_back();  // string_table::add appends the final NUL
      auto k = strings.add(joined);
      if (!k) return std::move(k).error();
      p.kernels = {k->first, k->second + 1};
    }
    p.kernel_count = std::uint32_t(e.kernels.size());
    // A piece plan (§4.2) for a standalone PTX entry; checked as a reader will check it.
    if (!e.plan.empty() && e.target.kind == entry_kind::ptx && e.link_parts == 0) {
      for (const auto& piece : e.plan.pieces)
        for (const auto& g : piece.globals)
          if (g.empty() || g.size() > detail::max_plan_global || g.find('\0') != std::string::npos)
            return make_error(errc::invalid_argument, e.origin + ": piece plan: invalid global name");
      const std::string bytes = detail::encode_piece_plan(e.plan);
      piece_plan check;
      const std::vector<std::string_view> names(e.kernels.begin(), e.kernels.end());
      if (std::string bad = detail::decode_piece_plan(bytes, e.bytes().size, names, check); !bad.empty())
        return make_error(errc::invalid_argument, e.origin + ": " + bad);
      auto pr = strings.add(bytes);
      if (!pr) return std::move(pr).error();
      p.plan = *pr;
      plans = true;
    }
  }

  const std::uint64_t entry_offset = header_size_v1;
  const std::uint64_t string_offset = entry_offset + std::uint64_t(entry_size_v1) * entries.size();
  const std::uint64_t string_size = strings.bytes().size();
  std::uint64_t pos = align_up(string_offset + string_size, payload_alignment);
  auto stored_of = [&](std::size_t i) {
    return options.codec == codec::none ? entries[i].bytes() : byte_span(prep[i].payload);
  };
  std::vector<std::uint64_t> payload_offsets(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    payload_offsets[i] = pos;
    pos = align_up(pos + stored_of(i).size, payload_alignment);
  }
  const std::uint64_t total = pos;
  // The head: header, entry table and strings, up to the first payload (one codec-none entry).
  const std::uint64_t written = head_only ? payload_offsets.front() : total;

  std::vector<std::uint8_t> out;
  out.reserve(std::size_t(written));
  prefault(out.data(), std::size_t(written));
  out.resize(std::size_t(written), 0);
  std::uint8_t* h = out.data();
  std::memcpy(h + h_magic, package_magic, sizeof package_magic);
  put16(h + h_major, format_major);
  put16(h + h_minor, plans ? format_minor_piece_plans : link_groups ? format_minor_link_groups : format_minor_plain);
  put32(h + h_header_size, header_size_v1);
  put64(h + h_total_size, total);
  put64(h + h_entry_offset, entry_offset);
  put32(h + h_entry_count, std::uint32_t(entries.size()));
  put32(h + h_entry_size, entry_size_v1);
  put64(h + h_string_offset, string_offset);
  put64(h + h_string_size, string_size);
  put32(h + h_name_offset, name_ref->first);
  put32(h + h_name_size, name_ref->second);
  put64(h + h_flags, 0);

  for (std::size_t i = 0; i < entries.size(); ++i) {
    const entry_input& e = entries[i];
    const prepared& p = prep[i];
    std::uint8_t* r = out.data() + entry_offset + i * entry_size_v1;
    r[e_kind] = std::uint8_t(e.target.kind);
    r[e_variant] = std::uint8_t(e.target.variant);
    r[e_codec] = std::uint8_t(options.codec);
    put32(r + e_arch, e.target.arch);
    put16(r + e_isa_major, e.ptx_isa.major);
    put16(r + e_isa_minor, e.ptx_isa.minor);
    put32(r + e_toolkit, e.toolkit_version);
    put64(r + e_payload_offset, payload_offsets[i]);
    const byte_span stored = stored_of(i);
    const std::uint64_t raw_hash = e.known_xxh3 ? e.known_xxh3 : xxh3(e.bytes());
    put64(r + e_stored_size, stored.size);
    put64(r + e_raw_size, e.bytes().size);
    put64(r + e_raw_xxh3, raw_hash);
    put64(r + e_stored_xxh3, options.codec == codec::none ? raw_hash : xxh3(stored));  // none: the same bytes
    put32(r + e_block_size, p.block_size);
    put32(r + e_module_offset, p.module.first);
    put32(r + e_module_size, p.module.second);
    put32(r + e_options_offset, p.opts.first);
    put32(r + e_options_size, p.opts.second);
    put32(r + e_kernels_offset, p.kernels.first);
    put32(r + e_kernels_size, p.kernels.second);
    put32(r + e_kernel_count, p.kernel_count);
    put16(r + e_link_part, e.link_part);
    put16(r + e_link_parts, e.link_parts);
    put32(r + e_plan_offset, p.plan.first);
    put32(r + e_plan_size, p.plan.second);
    if (stored.size && !head_only) std::memcpy(out.data() + payload_offsets[i], stored.data, stored.size);
  }
  if (string_size) std::memcpy(out.data() + string_offset, strings.bytes().data(), std::size_t(string_size));
  put64(h + h_tables_xxh3, xxh3(byte_span(out.data(), std::size_t(string_offset + string_size))));
  return out;
}

}  // namespace fatpack::core
