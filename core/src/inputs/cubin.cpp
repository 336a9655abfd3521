// Reading what fatpack needs from a cubin (an NVIDIA ELF64 file, e_machine 190 = EM_CUDA): its SM,
// its `a`/`f` variant, its kernels and the toolkit that built it.
//
// Policy: the ELF header, the program header table, the section header table and every section's
// file range are checked against the bytes present before anything is read; the sections parsed
// further (.shstrtab, .symtab/.strtab, .nv.compat, .note.nv.tkinfo) are checked field by field.
// Problems are returned as values naming the source and the field (errc::truncated when something
// runs past the end of the bytes, errc::malformed when a field is inconsistent). Every read is of a
// range checked against `bytes` first (sections without file bytes, SHT_NOBITS, are never read;
// tests/inputs and the fuzz target hold it to that).
//
// How the target is encoded, as measured on nvcc 13.0 (V13.0.88) output for vadd.cu built for
// sm_90/90a, sm_100/100a/100f, sm_103f, sm_110f, sm_120/120a/120f, sm_121f (and nvlink output):
//  - SM number: e_flags bits 8-15 when EI_ABIVERSION >= 8 (every CUDA 12.8+ cubin: 0x06005a04 =
//    sm_90, 0x06006402 = sm_100); the low byte in the older ABI 7 (LLVM's ELFABIVERSION_CUDA_V1,
//    EF_CUDA_SM = 0xff).
//  - e_flags does NOT carry `a` or `f`: sm_90 and sm_90a (and sm_100/100a/100f) have identical
//    e_flags; EF_CUDA_ACCELERATORS (0x8) is clear in all of them, so it is not used.
//  - `a`: the .nv.compat section (type 0x70000086, a list of {u8 format, u8 attribute, value}
//    records) holds attribute 0x09 with value 1 for sm_90a/sm_100a/sm_120a and 0 otherwise.
//  - `f`: NOT visible in the ELF structure at all. sm_100 and sm_100f cubins differ only in the
//    .note.nv.tkinfo note (type 2000, owner "NVIDIA Corp"), whose tool-options string is the
//    ptxas/nvlink command line: "-arch sm_100f -m 64 ". So `f` is read from that string (the first
//    note that names an -arch for this SM wins; nvlink output puts its own note first). A cubin
//    without the note (e.g. driver-JIT output) reads as plain. In an nvcc fatbin the entry flags
//    (0x200000) carry `f` authoritatively; import_fatbin uses those.
//  - Kernels: STT_FUNC symbols with st_other bit 0x10 (STO_CUDA_ENTRY) and a defining section.
//    Device functions (even global ones in -rdc cubins) lack the bit. Static kernels are
//    STB_LOCAL with the bit (cuModuleGetFunction finds them by name), so binding is not checked.
#include "fatpack/core/input.hpp"
#include "fatpack/core/hex.hpp"
#include "fatpack/core/le_bytes.hpp"
#include "inputs/inputs_internal.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace fatpack::core {
namespace {

using le::get16;
using le::get32;
using le::get64;

using detail::in_range;

constexpr std::uint16_t em_cuda = 190;
constexpr std::uint32_t sht_symtab = 2, sht_strtab = 3, sht_note = 7, sht_nobits = 8;
constexpr std::uint32_t sht_nv_compat = 0x70000086;
constexpr std::uint8_t stt_func = 2;
constexpr std::uint8_t stb_global = 1;
constexpr std::uint16_t et_rel = 1;
constexpr std::uint8_t sto_cuda_entry = 0x10;
constexpr std::uint32_t nt_nv_tkinfo = 2000;
constexpr std::uint8_t compat_attr_arch_specific = 0x09;

struct section {
  std::uint32_t name = 0, type = 0;
  std::uint64_t offset = 0, size = 0;
  std::uint32_t link = 0;
  std::uint64_t entsize = 0;
  std::string_view name_str;
};

// A NUL-terminated string at `off` inside `table`; false if it starts or runs outside.
bool c_string(byte_span table, std::uint64_t off, std::string_view* out) {
  if (off >= table.size) return false;
  const void* nul = std::memchr(table.data + off, 0, table.size - off);
  if (!nul) return false;
  *out = std::string_view(reinterpret_cast<const char*>(table.data + off),
                          static_cast<const std::uint8_t*>(nul) - (table.data + off));
  return true;
}


// Finds "-arch sm_100f" / "-arch=sm_100f" / "--gpu-name sm_100f" in a tool command line. Returns
// true and the variant when it names sm_<sm>; ignores other SMs (an nvlink line could in principle
// mention something else).
bool arch_from_options(std::string_view opts, std::uint32_t sm, arch_variant* variant) {
  auto tokens_next = [&](std::size_t& i) -> std::string_view {
    while (i < opts.size() && (opts[i] == ' ' || opts[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < opts.size() && opts[i] != ' ' && opts[i] != '\t') ++i;
    return opts.substr(start, i - start);
  };
  std::size_t i = 0;
  while (i < opts.size()) {
    std::string_view tok = tokens_next(i);
    if (tok.empty()) break;
    std::string_view value;
    for (std::string_view flag : {std::string_view("-arch"), std::string_view("--gpu-name")}) {
      if (tok == flag) value = tokens_next(i);
      else if (tok.size() > flag.size() + 1 && tok.substr(0, flag.size()) == flag && tok[flag.size()] == '=')
        value = tok.substr(flag.size() + 1);
    }
    auto t = target::parse(value);
    if (!t || t->kind != entry_kind::sass || t->arch != sm) continue;
    *variant = t->variant;
    return true;
  }
  return false;
}

// The SM number in e_flags: ABI 8 (CUDA 12.8+) moved it to bits 8-15; ABI 7 and older keep it in
// the low byte.
std::uint32_t sm_of_e_flags(std::uint8_t abi_version, std::uint32_t e_flags) {
  return abi_version >= 8 ? (e_flags >> 8) & 0xff : e_flags & 0xff;
}

}  // namespace

std::uint32_t cubin_header_sm(byte_span bytes) noexcept {
  const std::uint8_t* p = bytes.data;
  if (bytes.size < 64 || p[0] != 0x7f || p[1] != 'E' || p[2] != 'L' || p[3] != 'F' || p[4] != 2 || p[5] != 1 ||
      get16(p + 18) != em_cuda)
    return 0;
  return sm_of_e_flags(p[8], get32(p + 48));
}

result<cubin_info> parse_cubin(byte_span bytes, std::string_view source) {
  const std::string src(source);
  auto fail = [&](errc code, const std::string& what) { return make_error(code, src + ": " + what); };
  const std::uint8_t* p = bytes.data;
  const std::uint64_t size = bytes.size;

  static const std::uint8_t elf_magic[4] = {0x7f, 'E', 'L', 'F'};
  if (size < 4 || std::memcmp(p, elf_magic, 4) != 0) return fail(errc::bad_magic, "not an ELF file (no \\x7fELF magic)");
  if (size < 64) return fail(errc::truncated, "ELF header truncated (" + std::to_string(size) + " bytes, 64 needed)");
  if (p[4] != 2) return fail(errc::unsupported, "EI_CLASS is " + std::to_string(p[4]) + ", not 2 (cubins are 64-bit ELF)");
  if (p[5] != 1) return fail(errc::unsupported, "EI_DATA is " + std::to_string(p[5]) + ", not 1 (little-endian)");
  const std::uint16_t machine = get16(p + 18);
  if (machine != em_cuda)
    return fail(errc::bad_magic, "e_machine is " + std::to_string(machine) + ", not 190 (EM_CUDA): not a cubin");

  cubin_info info;
  info.abi_version = p[8];
  info.relocatable = get16(p + 16) == et_rel;
  const std::uint32_t e_flags = get32(p + 48);
  const std::uint32_t sm = sm_of_e_flags(info.abi_version, e_flags);
  if (sm == 0) return fail(errc::malformed, "e_flags " + hex(e_flags) + " hold no SM number");
  info.target.kind = entry_kind::sass;
  info.target.arch = sm;
  std::uint64_t extent = 64;

  // Program headers: only bounds-checked (fatpack does not need them, the driver does).
  const std::uint64_t phoff = get64(p + 32);
  const std::uint16_t phentsize = get16(p + 54), phnum = get16(p + 56);
  if (phnum != 0) {
    if (phentsize != 56) return fail(errc::malformed, "e_phentsize is " + std::to_string(phentsize) + ", expected 56");
    if (!in_range(phoff, std::uint64_t(phnum) * 56, size))
      return fail(errc::truncated, "program header table (" + std::to_string(phnum) + " entries at e_phoff " + hex(phoff) +
                                       ") runs past the end of the file (" + std::to_string(size) + " bytes)");
    extent = std::max(extent, phoff + std::uint64_t(phnum) * 56);
    for (std::uint16_t i = 0; i < phnum; ++i) {
      const std::uint8_t* ph = p + phoff + std::uint64_t(i) * 56;
      const std::uint64_t off = get64(ph + 8), filesz = get64(ph + 32);
      if (filesz == 0) continue;
      if (!in_range(off, filesz, size))
        return fail(errc::truncated, "program header " + std::to_string(i) + ": p_offset " + hex(off) + " + p_filesz " +
                                         hex(filesz) + " runs past the end of the file (" + std::to_string(size) + " bytes)");
      extent = std::max(extent, off + filesz);
    }
  }

  // Section headers. e_shnum == 0 with a table means "count in section 0's sh_size" (ELF
  // extended numbering); likewise e_shstrndx == SHN_XINDEX means "index in section 0's sh_link".
  const std::uint64_t shoff = get64(p + 40);
  const std::uint16_t shentsize = get16(p + 58);
  std::uint64_t shnum = get16(p + 60);
  std::uint64_t shstrndx = get16(p + 62);
  if (shoff == 0) return fail(errc::malformed, "no section header table (e_shoff is 0)");
  if (shentsize != 64) return fail(errc::malformed, "e_shentsize is " + std::to_string(shentsize) + ", expected 64");
  if (!in_range(shoff, 64, size))
    return fail(errc::truncated, "section header table at e_shoff " + hex(shoff) + " starts past the end of the file (" +
                                     std::to_string(size) + " bytes)");
  if (shnum == 0) shnum = get64(p + shoff + 32);
  if (shstrndx == 0xffff) shstrndx = get32(p + shoff + 40);
  if (shnum > (size - shoff) / 64)
    return fail(errc::truncated, "section header table (" + std::to_string(shnum) + " entries at e_shoff " + hex(shoff) +
                                     ") runs past the end of the file (" + std::to_string(size) + " bytes)");
  extent = std::max(extent, shoff + shnum * 64);
  if (shstrndx == 0 || shstrndx >= shnum)
    return fail(errc::malformed, "e_shstrndx " + std::to_string(shstrndx) + " is not a section (e_shnum " +
                                     std::to_string(shnum) + ")");

  std::vector<section> secs(static_cast<std::size_t>(shnum));
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const std::uint8_t* sh = p + shoff + i * 64;
    section& s = secs[static_cast<std::size_t>(i)];
    s.name = get32(sh);
    s.type = get32(sh + 4);
    s.offset = get64(sh + 24);
    s.size = get64(sh + 32);
    s.link = get32(sh + 40);
    s.entsize = get64(sh + 56);
    // A section without bytes has no offset worth keeping: an unchecked one (it is not range-checked
    // below) would make p + offset overflow where the section is used as an empty span (fuzz_cubin).
    if (s.size == 0) s.offset = 0;
    if (i == 0 || s.type == sht_nobits || s.type == 0 || s.size == 0) continue;
    if (!in_range(s.offset, s.size, size))
      return fail(errc::truncated, "section " + std::to_string(i) + ": sh_offset " + hex(s.offset) + " + sh_size " +
                                       hex(s.size) + " runs past the end of the file (" + std::to_string(size) + " bytes)");
    extent = std::max(extent, s.offset + s.size);
  }
  info.image_size = extent;

  const section& shstr = secs[static_cast<std::size_t>(shstrndx)];
  if (shstr.type != sht_strtab)
    return fail(errc::malformed, "section " + std::to_string(shstrndx) + " (e_shstrndx) has type " + hex(shstr.type) +
                                     ", not SHT_STRTAB");
  const byte_span shstr_bytes(p + shstr.offset, static_cast<std::size_t>(shstr.size));
  for (std::size_t i = 1; i < secs.size(); ++i)
    if (!c_string(shstr_bytes, secs[i].name, &secs[i].name_str))
      return fail(errc::malformed, "section " + std::to_string(i) + ": sh_name " + hex(secs[i].name) +
                                       " is not a string inside .shstrtab (" + std::to_string(shstr.size) + " bytes)");

  bool compat_says_a = false, compat_has_attr = false;
  bool tk_variant_found = false;
  arch_variant tk_variant = arch_variant::plain;

  for (std::size_t i = 1; i < secs.size(); ++i) {
    const section& s = secs[i];
    // Made only for an error: a cubin has a section per kernel and more, and this runs on every
    // cache hit.
    auto where_text = [&] { return "section " + std::to_string(i) + " (" + std::string(s.name_str) + ")"; };
    // SHT_NOBITS (and type 0, and empty) sections occupy no bytes of the file and were not
    // range-checked above: nothing below may read them, whatever their name says.
    if (s.type == sht_nobits || s.type == 0 || s.size == 0) continue;
    if (s.type == sht_symtab) {
      if (s.entsize != 24) return fail(errc::malformed, where_text() + ": sh_entsize is " + std::to_string(s.entsize) + ", expected 24");
      if (s.size % 24 != 0) return fail(errc::malformed, where_text() + ": sh_size " + hex(s.size) + " is not a multiple of 24");
      if (s.link == 0 || s.link >= secs.size() || secs[s.link].type != sht_strtab)
        return fail(errc::malformed, where_text() + ": sh_link " + std::to_string(s.link) + " is not a string table");
      const byte_span strtab(p + secs[s.link].offset, static_cast<std::size_t>(secs[s.link].size));
      for (std::uint64_t k = 1; k < s.size / 24; ++k) {  // symbol 0 is the null symbol
        const std::uint8_t* sym = p + s.offset + k * 24;
        const std::uint8_t st_info = sym[4], st_other = sym[5];
        const std::uint16_t st_shndx = get16(sym + 6);
        // Undefined global symbols (weak ones, nvcc's __UFT/__UDT tables, may stay undefined).
        const bool undefined_global = st_shndx == 0 && (st_info >> 4) == stb_global;
        if (!undefined_global && ((st_info & 0xf) != stt_func || !(st_other & sto_cuda_entry) || st_shndx == 0)) continue;
        std::string_view name;
        if (!c_string(strtab, get32(sym), &name))
          return fail(errc::malformed, where_text() + ": symbol " + std::to_string(k) + ": st_name " + hex(get32(sym)) +
                                           " is not a string inside its string table");
        if (name.empty()) continue;
        // .nv.reservedSmem.* and the like: symbols the driver itself provides at load time.
        if (undefined_global && name.rfind(".nv.", 0) == 0) continue;
        if (undefined_global) {
          if (info.unresolved.size() < 10000) info.unresolved.emplace_back(std::string(name));
          continue;
        }
        bool seen = false;
        for (const auto& kname : info.kernels) seen = seen || kname == name;
        if (!seen) info.kernels.emplace_back(std::string(name));
      }
    } else if (s.type == sht_nv_compat || s.name_str == ".nv.compat") {
      const std::uint8_t* d = p + s.offset;
      info.nv_compat.assign(d, d + s.size);
      // Records: {u8 format, u8 attribute, value}. Format 2 (byte) and 3 (half) records are 4
      // bytes; format 4 has a u16 length and that many bytes. Format 0 is padding; a format this
      // code does not know ends the walk (the `a` marker, if any, comes first in nvcc's output).
      std::uint64_t k = 0;
      while (k < s.size) {
        const std::uint8_t fmt = d[k];
        if (fmt == 0) break;
        if (fmt == 2 || fmt == 3) {
          if (k + 4 > s.size) return fail(errc::malformed, where_text() + ": record at +" + hex(k) + " runs past the section end");
          if (d[k + 1] == compat_attr_arch_specific) {
            compat_has_attr = true;
            compat_says_a = (fmt == 2 ? d[k + 2] : get16(d + k + 2)) != 0;
          }
          k += 4;
        } else if (fmt == 4) {
          if (k + 4 > s.size) return fail(errc::malformed, where_text() + ": record at +" + hex(k) + " runs past the section end");
          const std::uint64_t len = get16(d + k + 2);
          if (k + 4 + len > s.size)
            return fail(errc::malformed, where_text() + ": record at +" + hex(k) + " (length " + std::to_string(len) +
                                             ") runs past the section end");
          k += 4 + len;
        } else {
          break;
        }
      }
    } else if (s.type == sht_note && s.name_str == ".note.nv.tkinfo") {
      const std::uint8_t* d = p + s.offset;
      std::uint64_t k = 0;
      while (k + 12 <= s.size) {
        const std::uint64_t namesz = get32(d + k), descsz = get32(d + k + 4);
        const std::uint32_t type = get32(d + k + 8);
        const std::uint64_t name_at = k + 12, desc_at = name_at + ((namesz + 3) & ~std::uint64_t(3));
        if (!in_range(name_at, namesz, s.size) || !in_range(desc_at, descsz, s.size))
          return fail(errc::malformed, where_text() + ": note at +" + hex(k) + " (namesz " + std::to_string(namesz) +
                                           ", descsz " + std::to_string(descsz) + ") runs past the section end");
        const std::string_view owner(reinterpret_cast<const char*>(d + name_at),
                                     namesz ? static_cast<std::size_t>(namesz - 1) : 0);
        // Layout (version 2): u32 version, u32 offsets of object name, tool name, tool version,
        // tool branch, tool options, then the strings they point into.
        if (type == nt_nv_tkinfo && owner == "NVIDIA Corp" && descsz >= 24 && get32(d + desc_at) == 2) {
          const byte_span strings(d + desc_at + 24, static_cast<std::size_t>(descsz - 24));
          std::string_view tool_version, tool_options;
          if (!c_string(strings, get32(d + desc_at + 12), &tool_version) ||
              !c_string(strings, get32(d + desc_at + 20), &tool_options))
            return fail(errc::malformed, where_text() + ": note at +" + hex(k) + ": a string offset lies outside the note");
          if (info.toolkit_version == 0) info.toolkit_version = detail::release_version(tool_version);
          if (!tk_variant_found) tk_variant_found = arch_from_options(tool_options, sm, &tk_variant);
        }
        const std::uint64_t next = desc_at + ((descsz + 3) & ~std::uint64_t(3));
        if (next <= k) break;
        k = next;
      }
    }
  }

  // .nv.compat decides `a` when it has the attribute; the command line decides `f` (and `a` for
  // cubins without the attribute).
  if (compat_has_attr && compat_says_a) info.target.variant = arch_variant::arch_specific;
  else if (tk_variant_found && tk_variant == arch_variant::family) info.target.variant = arch_variant::family;
  else if (!compat_has_attr && tk_variant_found) info.target.variant = tk_variant;
  return info;
}

error relocatable_cubin_error(const cubin_info& info, const std::string& where) {
  std::string syms;
  const std::size_t shown = std::min<std::size_t>(info.unresolved.size(), 8);
  for (std::size_t i = 0; i < shown; ++i) syms += (i ? ", " : "") + info.unresolved[i];
  if (info.unresolved.size() > shown) syms += " and " + std::to_string(info.unresolved.size() - shown) + " more";
  return make_error(errc::unsupported,
                    where + ": relocatable cubin (" + info.target.str() + ", nvcc -rdc=true/-dc output) that was not " +
                        "device-linked" + (syms.empty() ? std::string() : "; unresolved symbols: " + syms) +
                        ". The driver would load it and not find its kernels: link the relocatable cubins of one " +
                        "module first (nvcc -dlink -cubin -arch=" + info.target.str() +
                        " a.cubin b.cubin -o linked.cubin, or fatpack build with -rdc=true)");
}

status refuse_relocatable_cubin(byte_span image, const std::string& where) {
  if (image.size < 64 || std::memcmp(image.data, "\x7f" "ELF", 4) != 0 || get16(image.data + 16) != et_rel) return {};
  auto ci = parse_cubin(image, where);
  if (!ci) return std::move(ci).error();
  return relocatable_cubin_error(*ci, where);
}

}  // namespace fatpack::core
