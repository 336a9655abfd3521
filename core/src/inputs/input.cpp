// What kind of file fatpack was given, and turning it into entries to package.
//
// Policy: kinds come from content, never from file names:
//   - fatpack package: its 8-byte magic (package.hpp);
//   - cubin: "\x7fELF", ELFCLASS64, e_machine 190 (EM_CUDA). Host ELF files (objects, executables
//     with an .nv_fatbin section) are not cubins;
//   - nvcc fatbin: u32 0xBA55ED50 at offset 0 (little-endian). One whose entries are all LTO-IR
//     (kind 8) is reported as ltoir;
//   - LTO-IR: NVVM's LTO-IR magic (bytes ED 43 4E 7F, what `nvcc -dlto -ltoir` writes) or LLVM
//     bitcode ("BC\xC0\xDE", or the bitcode wrapper DE C0 17 0B);
//   - PTX: after whitespace and comments the text starts with `.version`, and `.target` follows.
// Imports are all-or-nothing and errors name the source. A cubin for an SM that CUDA 13.0 does not
// know (arch_table.hpp) is refused here, so no caller can package it by mistake.
#include "fatpack/core/input.hpp"
#include "fatpack/core/ptx_split.hpp"
#include "inputs/inputs_internal.hpp"

#include "fatpack/core/arch_table.hpp"
#include "fatpack/core/hex.hpp"
#include "fatpack/core/package.hpp"

#include <cstdio>
#include <cstring>
#include <string>

namespace fatpack::core {
namespace {

bool starts_with(byte_span b, const std::uint8_t* magic, std::size_t n) { return b.size >= n && std::memcmp(b.data, magic, n) == 0; }

std::string first_bytes(byte_span b) {
  std::string s;
  const std::size_t n = b.size < 8 ? b.size : 8;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += hex_bytes(b.data + i, 1);
  }
  if (b.size > n) s += " ..";
  return s;
}

// Cubins for SMs nvcc 13.0 cannot build are refused (design: the CLI must not package them).
status check_known_sass(const entry_input& e, const std::string& where) {
  if (e.target.kind == entry_kind::sass && !is_known_arch(e.target.arch))
    return make_error(errc::unsupported, where + ": cubin for sm_" + std::to_string(e.target.arch) +
                                             ", an architecture CUDA 13.0 does not know");
  return {};
}

}  // namespace

const char* input_kind_name(input_kind k) noexcept {
  switch (k) {
    case input_kind::cubin: return "cubin";
    case input_kind::ptx: return "PTX";
    case input_kind::nvcc_fatbin: return "nvcc fatbin";
    case input_kind::fatpack_package: return "fatpack package";
    case input_kind::ltoir: return "LTO-IR";
    case input_kind::unknown: return "unknown";
  }
  return "unknown";
}

input_kind detect_input(byte_span bytes) {
  if (bytes.empty() || bytes.data == nullptr) return input_kind::unknown;
  if (starts_with(bytes, package_magic, sizeof package_magic)) return input_kind::fatpack_package;

  static const std::uint8_t elf[4] = {0x7f, 'E', 'L', 'F'};
  if (starts_with(bytes, elf, 4)) {
    if (bytes.size >= 20 && bytes.data[4] == 2 && bytes.data[5] == 1 && (bytes.data[18] | bytes.data[19] << 8) == 190)
      return input_kind::cubin;
    return input_kind::unknown;
  }

  static const std::uint8_t fatbin[4] = {0x50, 0xED, 0x55, 0xBA};  // 0xBA55ED50, little-endian
  if (starts_with(bytes, fatbin, 4)) return detail::fatbin_is_ltoir_only(bytes) ? input_kind::ltoir : input_kind::nvcc_fatbin;

  static const std::uint8_t nvvm_ltoir[4] = {0xED, 0x43, 0x4E, 0x7F};
  static const std::uint8_t bitcode[4] = {'B', 'C', 0xC0, 0xDE};
  static const std::uint8_t bitcode_wrapper[4] = {0xDE, 0xC0, 0x17, 0x0B};
  if (starts_with(bytes, nvvm_ltoir, 4) || starts_with(bytes, bitcode, 4) || starts_with(bytes, bitcode_wrapper, 4))
    return input_kind::ltoir;

  if (detail::is_ptx_text(bytes)) return input_kind::ptx;
  return input_kind::unknown;
}

result<std::vector<entry_input>> import_input(byte_span bytes, std::string_view source, const std::string& module_name,
                                              input_bytes how, bool unknown_sass_ok) {
  const bool borrow = how == input_bytes::borrow;
  const std::string src(source);
  std::vector<entry_input> out;
  switch (detect_input(bytes)) {
    case input_kind::cubin: {
      auto ci = parse_cubin(bytes, source);
      if (!ci) return std::move(ci).error();
      if (ci->relocatable) return relocatable_cubin_error(*ci, src);
      entry_input e;
      e.target = ci->target;
      e.toolkit_version = ci->toolkit_version;
      e.kernels = std::move(ci->kernels);
      if (borrow)
        e.borrowed = bytes;
      else
        e.raw.assign(bytes.begin(), bytes.end());
      e.origin = src;
      out.push_back(std::move(e));
      break;
    }
    case input_kind::ptx: {
      // Stored without a byte order mark and trailing NULs (docs/format.md); the runtime appends
      // one NUL for the driver.
      const byte_span text = detail::ptx_text(bytes);
      auto pi = parse_ptx(text, source);
      if (!pi) return std::move(pi).error();
      entry_input e;
      e.target = pi->target;
      e.ptx_isa = pi->isa;
      e.toolkit_version = pi->toolkit_version;
      e.kernels = std::move(pi->kernels);
      if (borrow)
        e.borrowed = text;
      else
        e.raw.assign(text.begin(), text.end());
      e.origin = src;
      out.push_back(std::move(e));
      break;
    }
    case input_kind::nvcc_fatbin: {
      auto entries = import_fatbin(bytes, source);
      if (!entries) return std::move(entries).error();
      out = std::move(entries.value());
      break;
    }
    case input_kind::ltoir:
      return make_error(errc::unsupported, src + ": LTO-IR cannot be imported (fatpack stores SASS and PTX; link it "
                                                 "with nvlink -dlto into a cubin first)");
    case input_kind::fatpack_package:
      return make_error(errc::unknown_kind, src + ": is already a fatpack package, not a cubin, PTX or nvcc fatbin "
                                                  "(use the package as it is)");
    case input_kind::unknown:
      if (bytes.empty()) return make_error(errc::unknown_kind, src + ": empty input (not a cubin, PTX or nvcc fatbin)");
      if (bytes.size >= 20 && std::memcmp(bytes.data, "\x7f" "ELF", 4) == 0) {
        // Most likely a host object or executable: its device code sits in an .nv_fatbin section.
        const unsigned machine = unsigned(bytes.data[18] | bytes.data[19] << 8);
        return make_error(errc::unknown_kind, src + ": not a cubin, PTX or nvcc fatbin (an ELF" +
                                                  (bytes.data[4] == 2 ? "64" : "32") + " file for e_machine " +
                                                  std::to_string(machine) + "; cubins are ELF64 for 190, EM_CUDA)");
      }
      return make_error(errc::unknown_kind,
                        src + ": not a cubin, PTX or nvcc fatbin (first bytes: " + first_bytes(bytes) + ")");
  }
  for (auto& e : out) {
    if (!(unknown_sass_ok && e.target.kind == entry_kind::sass)) {
      status st = check_known_sass(e, e.origin);
      if (!st) return st.error();
    }
    e.module_name = module_name;
    // Kernel-granular JIT: how the runtime compiles this PTX piece by piece (docs/format.md §4.2).
    if (e.target.kind == entry_kind::ptx) e.plan = make_piece_plan(e.bytes(), e.kernels, e.origin);
  }
  return out;
}

}  // namespace fatpack::core
