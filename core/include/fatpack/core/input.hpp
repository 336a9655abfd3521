// Recognising and importing what nvcc produces: cubins (ELF, e_machine 190), PTX text and nvcc
// fatbins (magic 0xBA55ED50, possibly with LZ4/ZSTD-compressed entries). Kinds are detected from
// content, never from file names.
#pragma once

#include "fatpack/core/error.hpp"
#include "fatpack/core/package_writer.hpp"
#include "fatpack/core/target.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fatpack::core {

enum class input_kind { cubin, ptx, nvcc_fatbin, fatpack_package, ltoir, unknown };
const char* input_kind_name(input_kind k) noexcept;

input_kind detect_input(byte_span bytes);

struct cubin_info {
  core::target target;               // kind sass; arch from e_flags; variant from .nv.compat / flags
  std::vector<std::string> kernels;  // entry functions, in symbol-table order
  // Toolkit that built it, from the ptxas/nvlink note (.note.nv.tkinfo "release 13.0" -> 13000);
  // 0 when the note is absent.
  std::uint32_t toolkit_version = 0;
  std::uint8_t abi_version = 0;             // EI_ABIVERSION (8 for CUDA 12.8+ cubins)
  std::uint64_t image_size = 0;             // bytes the ELF spans (headers, sections, tables)
  std::vector<std::uint8_t> nv_compat;      // the .nv.compat section (empty if none); write_fatbin
                                            // copies it into sm_100+ entry headers as fatbinary does
  // e_type ET_REL: nvcc -rdc=true / -dc output before the device link (nvlink). The driver loads
  // such a cubin without complaint, but its calls across files are unresolved and its kernels are
  // not found (cuModuleGetFunction: CUDA_ERROR_NOT_FOUND), so no fatpack reader accepts one.
  bool relocatable = false;
  // Global (not weak) symbols without a defining section: what a device link must supply
  // ("_Z5scalef"), in symbol-table order.
  std::vector<std::string> unresolved;
};
// The error for a relocatable cubin, naming `where` and its unresolved symbols (errc::unsupported).
error relocatable_cubin_error(const cubin_info& info, const std::string& where);
// For a SASS image about to be stored or loaded: an error (relocatable_cubin_error, or the parse
// error of a malformed one) when it is an ELF of e_type ET_REL; success for anything else, which is
// left to the reader that would handle it (a damaged ELF header is the driver's to refuse).
status refuse_relocatable_cubin(byte_span image, const std::string& where);

class package_view;
// `fatpack verify`'s check of one package: what package_view::verify checks (every payload and
// checksum), refuse_relocatable_cubin for every SASS entry (a relocatable cubin passes every
// checksum), and every piece of every piece plan rebuilt from its entry's PTX against the plan's
// size and XXH3 (an entry edited with its checksums updated but its plan kept passes the others):
// a mismatch is errc::checksum naming the package, the entry and the piece (from 0).
status verify_package_images(const package_view& pkg);
// Validates the ELF structure it reads (every offset checked); `source` names it in errors.
result<cubin_info> parse_cubin(byte_span bytes, std::string_view source);
// The SM number of a cubin's ELF header alone (e_flags, by its ABI version), 0 when the first 64
// bytes are not a 64-bit little-endian EM_CUDA ELF header. No section is read: for bytes already
// known whole (a cache entry whose checksum matched), where parse_cubin's walk would only repeat
// what was checked when they were stored.
std::uint32_t cubin_header_sm(byte_span bytes) noexcept;

// A kernel parameter as the `.entry` declares it: `.param .u64 x`, `.param .align 8 .b8 s[24]`.
// `offset` is where cuLaunchKernel puts it: after the previous one, aligned to `align` (the
// explicit `.align N`, else the type's size; a `.ptr` parameter's `.align` is its pointee's).
struct ptx_param {
  std::uint32_t offset = 0, size = 0, align = 1;
};

struct ptx_info {
  core::target target;   // kind ptx: ".target sm_90a" -> compute_90a
  core::ptx_isa isa;     // ".version 9.0"
  std::vector<std::string> kernels;  // names of `.entry` functions, in order
  // Each kernel's parameters, parallel to kernels; nullopt where the list is not understood (a
  // type this reader does not know): the PTX is still valid.
  std::vector<std::optional<std::vector<ptx_param>>> params;
  // From nvcc's header comment "// Cuda compilation tools, release 13.0, ..." (13000); 0 when
  // absent (fatbinary strips comments from the PTX it embeds).
  std::uint32_t toolkit_version = 0;
};
result<ptx_info> parse_ptx(byte_span bytes, std::string_view source);

// Every entry of every container in an nvcc fatbin (containers may be back to back), decompressed.
// All-or-nothing: on any error nothing is returned.
result<std::vector<entry_input>> import_fatbin(byte_span bytes, std::string_view source);

// Dispatches on detect_input(): a cubin or PTX gives one entry, a fatbin all of its entries.
// module_name defaults to the file's stem. A fatpack package as input is an error (use the package).
// `borrow`: a cubin's or PTX's entry borrows `bytes` (entry_input::borrowed) instead of copying them:
// for a caller that packs the entries before `bytes` go (add_image). A fatbin's entries are copied.
// `unknown_sass_ok`: a cubin for an SM this toolkit's table does not know is taken (code a driver made
// on this machine: fatpack's JIT output for a GPU newer than the toolkit, which fatpack::compile keeps
// under its source key), not refused as a package input is.
enum class input_bytes { copy, borrow };
result<std::vector<entry_input>> import_input(byte_span bytes, std::string_view source, const std::string& module_name,
                                              input_bytes how = input_bytes::copy, bool unknown_sass_ok = false);

// The size of an image given, as cuModuleLoadData gets it, without one: a cubin (from its ELF
// headers), an nvcc fatbin (one container, from its header) or PTX (up to and including its
// terminating NUL). Reads at most `limit` bytes from `image`, and only bytes the headers read so far
// say are inside the image; an image that says it is larger than `limit` is an error (malformed),
// as is anything else (unknown_kind). The memory must be readable up to the returned size.
result<std::size_t> image_extent(const void* image, std::size_t limit);

// Writes a standard NVIDIA fatbin (uncompressed entries) holding the given images, readable by
// cuobjdump and the driver. Only SASS and PTX entries are allowed.
result<std::vector<std::uint8_t>> write_fatbin(const std::vector<entry_input>& entries);

}  // namespace fatpack::core
