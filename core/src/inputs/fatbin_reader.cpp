// Importing nvcc fatbins (the ".nv_fatbin" data, magic 0xBA55ED50): every entry of every container,
// decompressed, with its target, PTX ISA, kernels and ptxas options.
//
// Layout (checked against nvcc/fatbinary 13.0 output; docs/format.md lists what is read):
//   container: u32 magic 0xBA55ED50, u16 version 1, u16 header size (0x10), u64 size of the entries;
//              containers follow each other back to back (zero padding after the last is allowed).
//   entry:     u16 kind (1 PTX, 2 ELF, 8 LTO-IR), u16 0x0101, u32 header size, u64 padded payload
//              size, u32 compressed size, u32 options-descriptor offset, u16 minor, u16 major,
//              u32 arch, u32 name offset, u32 name size, u64 flags, u64 reserved, u64 uncompressed
//              size; optional name / options descriptor {u32 offset, u32 size} inside the header;
//              the payload follows the header.
//   flags:     0x1 64-bit, 0x2 debug, 0x10 Linux, 0x1000 zlib, 0x2000 LZ4 block, 0x4000 LZ4 frame,
//              0x8000 ZSTD frame, 0x100000 `a`, 0x200000 `f`, 0x1000000 extended ELF header
//              (sm_100+: the descriptor then points at a 0x00 byte + the cubin's .nv.compat, not at
//              options).
//
// Policy: all-or-nothing (any problem fails the whole import); every offset and size is checked
// against the container and the input before use; decompressed sizes are checked against the
// header; errors name the source, the entry and the field. zlib entries (0x1000, fatbinary's hidden
// --compress-algorithm=1) are refused with errc::unsupported: zlib is not a fatpack dependency.
// LTO-IR entries are refused too: fatpack stores SASS and PTX (and the LTO-IR payload of nvcc 13.0
// fatbins is additionally transformed, flag 0x10000).
//
// What an import returns, and how it relates to separately compiled files (measured, nvcc 13.0):
//   - ELF entries are byte-identical to `nvcc -cubin` output for the same target; the payload is
//     cut to the ELF's own extent (uncompressed payloads are padded to 8 bytes).
//   - PTX entries are NOT byte-identical to `nvcc -ptx` output: fatbinary blanks comments and
//     strips indentation. .version, .target and the kernels are the same. The text is returned
//     without its NUL terminator and padding.
//   - toolkit_version comes from the cubin's .note.nv.tkinfo; PTX entries have none (0).
#include "fatpack/core/input.hpp"
#include "fatpack/core/hex.hpp"
#include "fatpack/core/le_bytes.hpp"
#include "inputs/fatbin_layout.hpp"
#include "inputs/inputs_internal.hpp"

#include <lz4.h>
#include <lz4frame.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <string>

namespace fatpack::core {
namespace {

using le::get16;
using le::get32;
using le::get64;

using detail::in_range;

// Container and entry header layout (fatbin_layout.hpp: the numbers the writer uses too).
using namespace fatbin_layout;
constexpr std::size_t entry_header_min = 0x40;

constexpr std::uint64_t flag_zlib = 0x1000, flag_lz4_block = 0x2000, flag_lz4_frame = 0x4000, flag_zstd = 0x8000;
constexpr std::uint64_t compression_mask = flag_zlib | flag_lz4_block | flag_lz4_frame | flag_zstd;

// LZ4 cannot expand more than 255:1 (each match byte encodes at most 255 output bytes).
constexpr std::uint64_t lz4_max_ratio = 255;
constexpr std::uint64_t max_uncompressed = std::uint64_t(1) << 32;
// A zstd frame expands most through RLE blocks: a 3-byte block header and 1 byte stand for at most
// one block of 128 KiB (Block_Maximum_Size). So N payload bytes decode to at most N/4 + 1 blocks.
constexpr std::uint64_t zstd_max_block = 128 * 1024;

struct entry_header {
  std::uint16_t kind = 0;
  std::uint32_t header_size = 0;
  std::uint64_t padded_size = 0;
  std::uint32_t compressed_size = 0;
  std::uint32_t options_offset = 0;
  std::uint16_t minor = 0, major = 0;
  std::uint32_t arch = 0;
  std::uint32_t name_offset = 0, name_size = 0;
  std::uint64_t flags = 0;
  std::uint64_t uncompressed_size = 0;
};

entry_header read_entry_header(const std::uint8_t* h) {
  entry_header e;
  e.kind = get16(h + 0x00);
  e.header_size = get32(h + 0x04);
  e.padded_size = get64(h + 0x08);
  e.compressed_size = get32(h + 0x10);
  e.options_offset = get32(h + 0x14);
  e.minor = get16(h + 0x18);
  e.major = get16(h + 0x1A);
  e.arch = get32(h + 0x1C);
  e.name_offset = get32(h + 0x20);
  e.name_size = get32(h + 0x24);
  e.flags = get64(h + 0x28);
  e.uncompressed_size = get64(h + 0x38);
  return e;
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\n' || s[b] == '\r' || s[b] == '\0')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\n' || s[e - 1] == '\r' || s[e - 1] == '\0')) --e;
  return std::string(s.substr(b, e - b));
}

bool all_zero(const std::uint8_t* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

const char* codec_label(std::uint64_t bit) {
  switch (bit) {
    case flag_lz4_block: return "LZ4 block";
    case flag_lz4_frame: return "LZ4 frame";
    case flag_zstd: return "ZSTD";
    default: return "zlib";
  }
}

// Decompresses one entry payload into exactly `usize` bytes. `what` prefixes error messages.
result<std::vector<std::uint8_t>> decompress_payload(std::uint64_t codec_bit, byte_span in, std::uint64_t usize,
                                                     const std::string& what) {
  auto fail = [&](errc code, const std::string& m) { return make_error(code, what + ": " + m); };
  const std::string label = codec_label(codec_bit);
  if (usize == 0) return fail(errc::malformed, "compressed with " + label + " but the uncompressed size (0x38) is 0");
  if (usize > max_uncompressed)
    return fail(errc::malformed, "uncompressed size " + hex(usize) + " (0x38) exceeds 4 GiB");
  if ((codec_bit == flag_lz4_block || codec_bit == flag_lz4_frame) && usize > in.size * lz4_max_ratio + 65536)
    return fail(errc::malformed, "uncompressed size " + hex(usize) + " (0x38) is impossible for " +
                                     std::to_string(in.size) + " bytes of " + label + " data");
  if (codec_bit == flag_zstd && usize > (in.size / 4 + 1) * zstd_max_block)
    return fail(errc::malformed, "uncompressed size " + hex(usize) + " (0x38) is impossible for " +
                                     std::to_string(in.size) + " bytes of " + label + " data");
  if (codec_bit == flag_zstd) {
    const unsigned long long declared = ZSTD_getFrameContentSize(in.data, in.size);
    if (declared == ZSTD_CONTENTSIZE_ERROR)
      return fail(errc::codec, "payload is not a ZSTD frame (flags say ZSTD, 0x8000)");
    if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != usize)
      return fail(errc::malformed, "ZSTD frame declares " + std::to_string(declared) +
                                       " bytes but the entry header (0x38) says " + std::to_string(usize));
  }
  std::vector<std::uint8_t> out;
  try {
    out.resize(static_cast<std::size_t>(usize));
  } catch (const std::bad_alloc&) {
    return fail(errc::codec, "cannot allocate " + std::to_string(usize) + " bytes to decompress the payload");
  }

  if (codec_bit == flag_lz4_block) {
    if (in.size > std::size_t(std::numeric_limits<int>::max()) || usize > std::uint64_t(std::numeric_limits<int>::max()))
      return fail(errc::unsupported, "LZ4 block entries over 2 GiB are not supported");
    const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data), reinterpret_cast<char*>(out.data()),
                                      int(in.size), int(usize));
    if (n < 0) return fail(errc::codec, "LZ4 block data is corrupt (LZ4_decompress_safe returned " + std::to_string(n) + ")");
    if (std::uint64_t(n) != usize)
      return fail(errc::codec, "LZ4 block decompressed to " + std::to_string(n) + " bytes, the header (0x38) says " +
                                   std::to_string(usize));
  } else if (codec_bit == flag_lz4_frame) {
    LZ4F_dctx* ctx = nullptr;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION)))
      return fail(errc::codec, "cannot create an LZ4 frame decoder");
    std::size_t in_pos = 0, out_pos = 0, hint = 1;
    std::string err;
    while (hint != 0) {
      std::size_t src = in.size - in_pos, dst = out.size() - out_pos;
      if (src == 0) {
        err = "LZ4 frame ends early (truncated payload)";
        break;
      }
      hint = LZ4F_decompress(ctx, out.data() + out_pos, &dst, in.data + in_pos, &src, nullptr);
      if (LZ4F_isError(hint)) {
        err = std::string("LZ4 frame data is corrupt (") + LZ4F_getErrorName(hint) + ")";
        break;
      }
      in_pos += src;
      out_pos += dst;
      if (hint != 0 && src == 0 && dst == 0) {  // no progress: the output buffer is full
        err = "LZ4 frame holds more than the " + std::to_string(usize) + " bytes the header (0x38) says";
        break;
      }
    }
    LZ4F_freeDecompressionContext(ctx);
    if (!err.empty()) return fail(errc::codec, err);
    if (out_pos != usize)
      return fail(errc::codec, "LZ4 frame decompressed to " + std::to_string(out_pos) + " bytes, the header (0x38) says " +
                                   std::to_string(usize));
  } else {
    const std::size_t n = ZSTD_decompress(out.data(), out.size(), in.data, in.size);
    if (ZSTD_isError(n)) return fail(errc::codec, std::string("ZSTD data is corrupt (") + ZSTD_getErrorName(n) + ")");
    if (n != usize)
      return fail(errc::codec, "ZSTD decompressed to " + std::to_string(n) + " bytes, the header (0x38) says " +
                                   std::to_string(usize));
  }
  return out;
}

}  // namespace

namespace detail {

// True when the bytes are a well-formed fatbin whose entries are all LTO-IR (kind 8): such a file
// is reported as input_kind::ltoir. Reads headers only.
bool fatbin_is_ltoir_only(byte_span bytes) {
  std::uint64_t pos = 0, count = 0;
  while (pos + container_header_size <= bytes.size && get32(bytes.data + pos) == container_magic) {
    const std::uint64_t hs = get16(bytes.data + pos + 6), body = get64(bytes.data + pos + 8);
    if (hs < container_header_size || !in_range(pos + hs, body, bytes.size)) return false;
    std::uint64_t e = pos + hs;
    const std::uint64_t end = pos + hs + body;
    while (e < end) {
      if (end - e < entry_header_min) return false;
      const entry_header h = read_entry_header(bytes.data + e);
      if (h.header_size < entry_header_min || !in_range(e, h.header_size, end) ||
          !in_range(e + h.header_size, h.padded_size, end))
        return false;
      if (h.kind != kind_ltoir) return false;
      ++count;
      e += h.header_size + h.padded_size;
    }
    pos = end;
  }
  return count > 0;
}

}  // namespace detail

result<std::vector<entry_input>> import_fatbin(byte_span bytes, std::string_view source) {
  const std::string src(source);
  auto fail = [&](errc code, const std::string& what) { return make_error(code, src + ": " + what); };
  const std::uint8_t* p = bytes.data;
  const std::uint64_t size = bytes.size;
  if (size < container_header_size)
    return fail(errc::truncated, "fatbin header truncated (" + std::to_string(size) + " bytes, 16 needed)");

  std::vector<entry_input> out;
  std::uint64_t pos = 0;
  std::size_t index = 0;
  while (pos < size) {
    const std::string cwhere = "container at offset " + hex(pos);
    if (size - pos < container_header_size || get32(p + pos) != container_magic) {
      // Zero padding after the last container (8-byte alignment in .nv_fatbin) is fine.
      if (pos > 0 && all_zero(p + pos, static_cast<std::size_t>(size - pos))) break;
      if (size - pos < container_header_size)
        return fail(errc::truncated, cwhere + ": header truncated (" + std::to_string(size - pos) + " bytes left)");
      return fail(pos == 0 ? errc::bad_magic : errc::malformed,
                  cwhere + ": magic " + hex(get32(p + pos)) + " is not 0xba55ed50 (not an nvcc fatbin container)");
    }
    const std::uint16_t version = get16(p + pos + 4), hs = get16(p + pos + 6);
    const std::uint64_t body = get64(p + pos + 8);
    if (version != container_version)
      return fail(errc::unsupported_version, cwhere + ": version " + std::to_string(version) + " (fatpack reads version 1)");
    if (hs < container_header_size)
      return fail(errc::malformed, cwhere + ": header size " + std::to_string(hs) + " is below 16");
    if (!in_range(pos + hs, body, size))
      return fail(errc::truncated, cwhere + ": entries size " + hex(body) + " runs past the end of the input (" +
                                       std::to_string(size) + " bytes)");
    std::uint64_t e = pos + hs;
    const std::uint64_t end = pos + hs + body;
    while (e < end) {
      std::string where = "entry " + std::to_string(index) + " at offset " + hex(e);
      if (end - e < entry_header_min)
        return fail(errc::truncated, where + ": header (64 bytes) runs past the container end (" + hex(end) + ")");
      const entry_header h = read_entry_header(p + e);
      if (h.header_size < entry_header_min)
        return fail(errc::malformed, where + ": header size " + hex(h.header_size) + " is below 0x40");
      if (!in_range(e, h.header_size, end))
        return fail(errc::truncated, where + ": header size " + hex(h.header_size) + " runs past the container end (" +
                                         hex(end) + ")");
      if (!in_range(e + h.header_size, h.padded_size, end))
        return fail(errc::truncated, where + ": payload size " + hex(h.padded_size) + " runs past the container end (" +
                                         hex(end) + ")");
      if (h.padded_size == 0) return fail(errc::malformed, where + ": empty payload");
      if (h.name_offset != 0 && !in_range(h.name_offset, h.name_size, h.header_size))
        return fail(errc::malformed, where + ": name (offset " + hex(h.name_offset) + ", size " + hex(h.name_size) +
                                         ") lies outside the entry header");
      byte_span descriptor;
      if (h.options_offset != 0) {
        if (!in_range(h.options_offset, 8, h.header_size))
          return fail(errc::malformed, where + ": options descriptor at " + hex(h.options_offset) +
                                           " lies outside the entry header");
        const std::uint32_t o = get32(p + e + h.options_offset), l = get32(p + e + h.options_offset + 4);
        if (!in_range(o, l, h.header_size))
          return fail(errc::malformed, where + ": options (offset " + hex(o) + ", size " + hex(l) +
                                           ") lie outside the entry header");
        descriptor = byte_span(p + e + o, l);
      }

      target t;
      if (h.kind == kind_elf) t.kind = entry_kind::sass;
      else if (h.kind == kind_ptx) t.kind = entry_kind::ptx;
      else if (h.kind == kind_ltoir) t.kind = entry_kind::ltoir;
      else return fail(errc::unsupported, where + ": unknown entry kind " + std::to_string(h.kind) + " (1 PTX, 2 ELF, 8 LTO-IR)");
      t.arch = h.arch;
      if ((h.flags & flag_arch_specific) && (h.flags & flag_family))
        return fail(errc::malformed, where + ": flags " + hex(h.flags) + " mark the entry both `a` (0x100000) and `f` (0x200000)");
      if (h.flags & flag_arch_specific) t.variant = arch_variant::arch_specific;
      if (h.flags & flag_family) t.variant = arch_variant::family;
      if (h.arch == 0) return fail(errc::malformed, where + ": arch (0x1c) is 0");
      where = "entry " + std::to_string(index) + " (" + t.str() + " " + kind_name(t.kind) + ")";

      if (t.kind == entry_kind::ltoir)
        return fail(errc::unsupported, where + ": LTO-IR entries cannot be imported (fatpack stores SASS and PTX; "
                                               "link LTO-IR with nvlink -dlto first)");

      const byte_span payload(p + e + h.header_size, static_cast<std::size_t>(h.padded_size));
      const std::uint64_t codec_bits = h.flags & compression_mask;
      std::vector<std::uint8_t> raw;
      if (codec_bits != 0) {
        if (codec_bits & (codec_bits - 1))
          return fail(errc::malformed, where + ": flags " + hex(h.flags) + " name more than one compression method");
        if (codec_bits == flag_zlib)
          return fail(errc::unsupported, where + ": payload is compressed with zlib (flag 0x1000, fatbinary "
                                                 "--compress-algorithm=1), which fatpack does not decode; rebuild "
                                                 "with the default compression (ZSTD) or -compress-mode=speed (LZ4)");
        if (h.compressed_size == 0 || h.compressed_size > h.padded_size)
          return fail(errc::malformed, where + ": compressed size " + hex(h.compressed_size) + " (0x10) is 0 or exceeds "
                                                   "the payload size " + hex(h.padded_size));
        auto d = decompress_payload(codec_bits, payload.subspan(0, h.compressed_size), h.uncompressed_size, src + ": " + where);
        if (!d) return std::move(d).error();
        raw = std::move(d.value());
      } else {
        raw.assign(payload.begin(), payload.end());
      }

      entry_input in;
      in.target = t;
      in.origin = src + ": fatbin entry " + std::to_string(index) + " (" + t.str() + " " + kind_name(t.kind) + ")";
      const std::string image_source = src + ": " + where;
      if (t.kind == entry_kind::sass) {
        auto ci = parse_cubin(byte_span(raw), image_source);
        if (!ci) return std::move(ci).error();
        if (ci->relocatable) return relocatable_cubin_error(*ci, image_source);  // an nvcc -dc object's fatbin
        if (ci->target.arch != t.arch)
          return fail(errc::malformed, where + ": the header says " + t.str() + " but the cubin's e_flags say sm_" +
                                           std::to_string(ci->target.arch));
        // The header flags are what the driver selects by; they also carry `f`, which a cubin
        // itself only shows in its tool note. A cubin that .nv.compat marks `a` must be labelled `a`.
        if (ci->target.variant == arch_variant::arch_specific && t.variant != arch_variant::arch_specific)
          return fail(errc::malformed, where + ": the cubin is " + ci->target.str() + " (.nv.compat) but the header says " +
                                           t.str());
        // Uncompressed payloads are padded to 8 bytes: keep the cubin exactly as ptxas wrote it.
        if (ci->image_size < raw.size() && all_zero(raw.data() + ci->image_size, raw.size() - ci->image_size))
          raw.resize(static_cast<std::size_t>(ci->image_size));
        in.kernels = std::move(ci->kernels);
        in.toolkit_version = ci->toolkit_version;
        // ELF descriptors are either absent or (sm_100+, flag 0x1000000) the .nv.compat blob: no options.
      } else {
        {
          const byte_span text = detail::ptx_text(byte_span(raw));
          const std::size_t skip = std::size_t(text.data - raw.data());
          raw.resize(skip + text.size);
          raw.erase(raw.begin(), raw.begin() + long(skip));
        }
        auto pi = parse_ptx(byte_span(raw), image_source);
        if (!pi) return std::move(pi).error();
        if (pi->target != t)
          return fail(errc::malformed, where + ": the header says " + t.str() + " but the PTX's .target says " +
                                           pi->target.str());
        if (pi->isa.major != h.major || pi->isa.minor != h.minor)
          return fail(errc::malformed, where + ": the header says PTX ISA " + std::to_string(h.major) + "." +
                                           std::to_string(h.minor) + " but the PTX's .version is " + pi->isa.str());
        in.ptx_isa = pi->isa;
        in.kernels = std::move(pi->kernels);
        in.toolkit_version = pi->toolkit_version;
        if (!descriptor.empty()) in.options = trim(std::string_view(reinterpret_cast<const char*>(descriptor.data), descriptor.size));
      }
      in.raw = std::move(raw);
      out.push_back(std::move(in));
      e += h.header_size + h.padded_size;
      ++index;
    }
    pos = end;
  }
  if (out.empty()) return fail(errc::malformed, "the fatbin holds no entries");
  return out;
}

}  // namespace fatpack::core
