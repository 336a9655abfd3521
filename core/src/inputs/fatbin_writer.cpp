// Writing a standard NVIDIA fatbin (one container, uncompressed entries) from SASS and PTX images,
// for tools and loaders that expect nvcc's format (cuobjdump, cuModuleLoadData, `fatpack
// export-fatbin`).
//
// Policy: write exactly what `fatbinary -compress=false --image3=...` (CUDA 13.0) writes for the same
// images, so that anything which reads nvcc output reads ours (layout: fatbin_reader.cpp and
// checked against nvcc/fatbinary 13.0 output):
//   - one container {0xBA55ED50, version 1, header 0x10, size of the entries};
//   - ELF entries: kind 2, header 0x40, version "1.<EI_ABIVERSION>" (1.8), flags 0x11 (64-bit,
//     Linux host) plus 0x100000 for `a` / 0x200000 for `f`. For sm_100 and newer fatbinary adds
//     flag 0x1000000 and an options descriptor {0x48, size of .nv.compat} pointing at a 0x00 byte
//     followed by the cubin's .nv.compat section (header 0x70); we copy that byte for byte;
//   - PTX entries: kind 1, header 0x50 (more with options), ISA major/minor, the options descriptor
//     at 0x40 pointing at 0x48 (the options string, NUL-terminated, or just the NUL), the PTX text
//     followed by one NUL (as nvcc embeds it) and zero padding;
//   - payloads padded with zeros to 8 bytes; headers' unused fields zero.
// The only intended difference: fatbinary blanks comments and indentation in the PTX it embeds; we
// keep the text as given. Output is deterministic. Images are validated (parse_cubin / parse_ptx)
// and must agree with their target, so a mislabelled entry cannot be written.
#include "fatpack/core/input.hpp"
#include "fatpack/core/le_bytes.hpp"
#include "inputs/fatbin_layout.hpp"
#include "inputs/inputs_internal.hpp"

#include <algorithm>
#include <string>

namespace fatpack::core {
namespace {

using namespace fatbin_layout;  // the numbers fatbin_reader.cpp reads
constexpr std::uint16_t entry_format_version = 0x0101;
constexpr std::uint32_t entry_header_base = 0x40;
constexpr std::uint32_t descriptor_data_offset = 0x48;  // descriptor at 0x40 is {u32 offset, u32 size}
constexpr std::uint64_t flag_64bit = 0x1, flag_linux = 0x10;
constexpr std::uint64_t flag_extended_elf = 0x1000000;
constexpr std::uint32_t first_extended_elf_arch = 100;

std::uint64_t align8(std::uint64_t n) { return (n + 7) & ~std::uint64_t(7); }

std::uint64_t variant_flags(arch_variant v) {
  return v == arch_variant::arch_specific ? flag_arch_specific : v == arch_variant::family ? flag_family : 0;
}

// Appends one entry: header (with `descriptor` bytes at 0x48 when has_descriptor) and padded payload.
void append_entry(std::vector<std::uint8_t>& out, std::uint16_t kind, std::uint16_t major, std::uint16_t minor,
                  std::uint32_t arch, std::uint64_t flags, bool has_descriptor, std::uint32_t descriptor_size,
                  const std::vector<std::uint8_t>& descriptor, const std::uint8_t* payload, std::size_t payload_size,
                  bool nul_terminate) {
  const std::uint64_t header_size =
      has_descriptor ? align8(descriptor_data_offset + descriptor.size()) : std::uint64_t(entry_header_base);
  const std::uint64_t content = payload_size + (nul_terminate ? 1 : 0);
  const std::uint64_t padded = align8(content);
  const std::size_t at = out.size();
  out.resize(at + static_cast<std::size_t>(header_size + padded), 0);
  le::store<std::uint16_t>(out, at + 0x00, kind);
  le::store<std::uint16_t>(out, at + 0x02, entry_format_version);
  le::store<std::uint32_t>(out, at + 0x04, std::uint32_t(header_size));
  le::store<std::uint64_t>(out, at + 0x08, padded);
  // 0x10 compressed size: 0 (uncompressed)
  if (has_descriptor) le::store<std::uint32_t>(out, at + 0x14, entry_header_base);
  le::store<std::uint16_t>(out, at + 0x18, minor);
  le::store<std::uint16_t>(out, at + 0x1A, major);
  le::store<std::uint32_t>(out, at + 0x1C, arch);
  // 0x20/0x24 name: none
  le::store<std::uint64_t>(out, at + 0x28, flags);
  // 0x30 reserved, 0x38 uncompressed size: 0
  if (has_descriptor) {
    le::store<std::uint32_t>(out, at + 0x40, descriptor_data_offset);
    le::store<std::uint32_t>(out, at + 0x44, descriptor_size);
    std::copy(descriptor.begin(), descriptor.end(), out.begin() + static_cast<std::ptrdiff_t>(at + descriptor_data_offset));
  }
  std::copy(payload, payload + payload_size, out.begin() + static_cast<std::ptrdiff_t>(at + header_size));
}

}  // namespace

result<std::vector<std::uint8_t>> write_fatbin(const std::vector<entry_input>& entries) {
  if (entries.empty()) return make_error(errc::invalid_argument, "no entries to write into a fatbin");
  std::vector<std::uint8_t> out(container_header_size, 0);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const entry_input& e = entries[i];
    const std::string where = "entry " + std::to_string(i) + " (" + e.target.str() + " " + kind_name(e.target.kind) + ")";
    auto fail = [&](errc code, const std::string& what) { return make_error(code, where + ": " + what); };
    const std::uint64_t flags = flag_64bit | flag_linux | variant_flags(e.target.variant);

    if (e.target.kind == entry_kind::sass) {
      auto ci = parse_cubin(byte_span(e.raw), where);
      if (!ci) return std::move(ci).error();
      if (ci->target.arch != e.target.arch)
        return fail(errc::invalid_argument, "the cubin's e_flags say sm_" + std::to_string(ci->target.arch));
      if (ci->target.variant == arch_variant::arch_specific && e.target.variant != arch_variant::arch_specific)
        return fail(errc::invalid_argument, "the cubin is " + ci->target.str() + " (.nv.compat)");
      const bool extended = e.target.arch >= first_extended_elf_arch && !ci->nv_compat.empty();
      std::vector<std::uint8_t> blob;
      if (extended) {
        blob.push_back(0);  // fatbinary writes a 0x00 byte before the copy of .nv.compat
        blob.insert(blob.end(), ci->nv_compat.begin(), ci->nv_compat.end());
      }
      append_entry(out, kind_elf, 1, ci->abi_version, e.target.arch, flags | (extended ? flag_extended_elf : 0), extended,
                   std::uint32_t(ci->nv_compat.size()), blob, e.raw.data(), e.raw.size(), false);
    } else if (e.target.kind == entry_kind::ptx) {
      const byte_span text = detail::ptx_text(byte_span(e.raw));
      auto pi = parse_ptx(text, where);
      if (!pi) return std::move(pi).error();
      if (pi->target != e.target)
        return fail(errc::invalid_argument, "the PTX's .target says " + pi->target.str());
      if (e.ptx_isa.known() && !(e.ptx_isa == pi->isa))
        return fail(errc::invalid_argument, "PTX ISA " + e.ptx_isa.str() + " given but the PTX's .version is " + pi->isa.str());
      std::vector<std::uint8_t> opts(e.options.begin(), e.options.end());
      const auto opts_size = std::uint32_t(opts.size());
      opts.push_back(0);
      append_entry(out, kind_ptx, pi->isa.major, pi->isa.minor, e.target.arch, flags, true, opts_size, opts,
                   text.data, text.size, true);
    } else {
      return fail(errc::invalid_argument, "only SASS and PTX entries can be written into a fatbin");
    }
  }
  le::store<std::uint32_t>(out, 0, container_magic);
  le::store<std::uint16_t>(out, 4, container_version);
  le::store<std::uint16_t>(out, 6, container_header_size);
  le::store<std::uint64_t>(out, 8, out.size() - container_header_size);
  return out;
}

}  // namespace fatpack::core
