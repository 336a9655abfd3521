// Entry encoding and validation (entry.hpp).
#include "cache/entry.hpp"

#include "platform/log.hpp"
#include "platform/os.hpp"

#include "fatpack/core/codec.hpp"
#include "fatpack/core/input.hpp"
#include "fatpack/core/le_bytes.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace fatpack::detail::cache {

namespace {

constexpr char entry_magic[8] = {'F', 'P', 'K', 'C', 'U', 'B', 'I', 'N'};
constexpr std::uint32_t known_flags = 0xF;  // codec bits; any other bit is a feature we do not know
constexpr std::size_t hash_offset = 120;    // header XXH3 covers [0, 120)
// LZ4 HC level 9: ~5x on cubins at ~20+ MB/s (measured: docs/cache.md), a small fraction
// of the JIT it saves; decompression is as fast as for the default level.
constexpr int lz4_level = 9;
// The payload is the package format's blocked LZ4 (docs/format.md §5, core's codec): 256 KiB blocks
// decode on several threads, which is most of a large hit's time (~4 GB/s per thread).
constexpr std::uint32_t block_size = 256u << 10;
// The header's SM word: arch | a | f.
constexpr std::uint32_t sm_bit_a = 0x10000, sm_bit_f = 0x20000;

std::uint64_t max_payload(std::uint64_t cubin_size, std::uint32_t bs) {
  // Every block stored raw, plus the block table.
  return cubin_size + 4 * ((cubin_size + bs - 1) / bs);
}

// Every field little-endian (docs/cache.md §3), on any host.
template <class T>
void put(std::uint8_t* p, std::size_t off, T v) {
  core::le::store(p + off, v);
}
template <class T>
T get(const std::uint8_t* p, std::size_t off) {
  return core::le::load<T>(p + off);
}

}  // namespace

std::optional<std::uint32_t> cubin_sm_word(core::byte_span cubin) {
  auto info = core::parse_cubin(cubin, "JIT output");
  if (!info) return std::nullopt;
  std::uint32_t w = info->target.arch;
  if (info->target.variant == core::arch_variant::arch_specific) w |= sm_bit_a;
  if (info->target.variant == core::arch_variant::family) w |= sm_bit_f;
  return w;
}

std::uint32_t sm_arch(std::uint32_t word) { return word & 0xFFFF; }

core::arch_variant sm_variant(std::uint32_t word) {
  if (word & sm_bit_f) return core::arch_variant::family;
  if (word & sm_bit_a) return core::arch_variant::arch_specific;
  return core::arch_variant::plain;
}

std::optional<std::vector<std::uint8_t>> encode_entry(const full_key& key, core::byte_span cubin,
                                                      std::int64_t created_unix_ns, std::string& why, entry_codec codec) {
  if (cubin.size == 0 || cubin.size > max_cubin_bytes) {
    why = "cubin of " + std::to_string(cubin.size) + " bytes is not cacheable (limit " +
          std::to_string(max_cubin_bytes) + ")";
    return std::nullopt;
  }
  auto sm = cubin_sm_word(cubin);
  if (!sm) {
    why = "the JIT output is not a cubin the cache can check (no ELF e_flags SM)";
    return std::nullopt;
  }
  std::vector<std::uint8_t> packed;
  core::byte_span payload = cubin;
  if (codec == entry_codec::lz4) {
    auto c = core::compress_lz4(lz4_level, block_size, cubin);
    if (!c) {
      why = c.error().message;
      return std::nullopt;
    }
    packed = std::move(*c);
    payload = core::byte_span(packed.data(), packed.size());
  }
  const std::size_t texts = key.code.text.size() + key.driver.text.size();
  // A stored cubin starts at a multiple of 64 bytes (format 1.2): zero bytes extend the header (which
  // every 1.x reader skips: header_size says where the texts start), so a reader that maps the file
  // hands the driver an aligned cubin. Unpadded where the padding would push the texts past the front
  // that readers read in one go (max_entry_front): such texts do not occur in practice.
  std::size_t header = entry_header_size;
  if (codec == entry_codec::stored) {
    const std::size_t pad = (64 - (entry_header_size + texts) % 64) % 64;
    if (entry_header_size + pad + texts <= max_entry_front) header += pad;
  }
  std::vector<std::uint8_t> out(header + texts + payload.size);
  const std::size_t n = payload.size;
  std::memcpy(out.data() + header + texts, payload.data, n);
  const std::uint8_t* stored = out.data() + header + texts;
  std::uint8_t* h = out.data();
  std::memcpy(h, entry_magic, 8);
  put<std::uint16_t>(h, 8, format_major);
  put<std::uint16_t>(h, 10, format_minor);
  put<std::uint32_t>(h, 12, static_cast<std::uint32_t>(header));
  put<std::uint32_t>(h, 16, static_cast<std::uint32_t>(codec));
  put<std::uint32_t>(h, 20, static_cast<std::uint32_t>(key.code.text.size()));
  put<std::uint32_t>(h, 24, static_cast<std::uint32_t>(key.driver.text.size()));
  put<std::uint32_t>(h, 28, *sm);
  std::memcpy(h + 32, key.code.hash.data(), 16);
  put<std::uint64_t>(h, 48, key.driver.hash);
  put<std::uint64_t>(h, 56, cubin.size);
  put<std::uint64_t>(h, 64, static_cast<std::uint64_t>(n));
  const std::uint64_t cubin_xxh3 = core::xxh3(cubin);
  put<std::uint64_t>(h, 72, codec == entry_codec::stored ? cubin_xxh3 : core::xxh3(core::byte_span(stored, n)));
  put<std::uint64_t>(h, 80, cubin_xxh3);
  put<std::int64_t>(h, 88, created_unix_ns);
  put<std::uint32_t>(h, 96, codec == entry_codec::lz4 ? block_size : 0);
  put<std::uint64_t>(h, hash_offset, XXH3_64bits(h, hash_offset));
  std::memcpy(h + header, key.code.text.data(), key.code.text.size());
  std::memcpy(h + header + key.code.text.size(), key.driver.text.data(), key.driver.text.size());
  return out;
}

std::optional<std::string> parse_header(core::byte_span b, std::uint64_t file_size, entry_header& h) {
  if (b.size < entry_header_size || file_size < entry_header_size)
    return "shorter (" + std::to_string(file_size) + " bytes) than an entry header";
  const std::uint8_t* p = b.data;
  if (std::memcmp(p, entry_magic, 8) != 0) return std::string("not a fatpack cache entry (bad magic)");
  h.major = get<std::uint16_t>(p, 8);
  h.minor = get<std::uint16_t>(p, 10);
  h.header_size = get<std::uint32_t>(p, 12);
  if (h.major != format_major)
    return "entry format " + std::to_string(h.major) + "." + std::to_string(h.minor) + ", this runtime reads " +
           std::to_string(format_major) + ".x";
  // A later minor may extend the header (1.2 pads it to align a stored cubin); this reader checks
  // the fields it knows, all in the first entry_header_size bytes: a reader of the header alone (the
  // index rebuild) needs no more. Whoever reads the texts checks it has them (check_front).
  if (h.header_size < entry_header_size || h.header_size > file_size)
    return "header size " + std::to_string(h.header_size) + " out of range";
  if (get<std::uint64_t>(p, hash_offset) != XXH3_64bits(p, hash_offset)) return std::string("header checksum mismatch");
  h.flags = get<std::uint32_t>(p, 16);
  if ((h.flags & ~known_flags) != 0 || (h.codec() != entry_codec::lz4 && h.codec() != entry_codec::stored))
    return "unknown flags " + core::hex(h.flags) + " (a newer format?)";
  h.code_text_size = get<std::uint32_t>(p, 20);
  h.driver_text_size = get<std::uint32_t>(p, 24);
  h.sm = get<std::uint32_t>(p, 28);
  std::memcpy(h.code_hash.data(), p + 32, 16);
  h.driver_hash = get<std::uint64_t>(p, 48);
  h.cubin_size = get<std::uint64_t>(p, 56);
  h.payload_size = get<std::uint64_t>(p, 64);
  h.payload_xxh3 = get<std::uint64_t>(p, 72);
  h.cubin_xxh3 = get<std::uint64_t>(p, 80);
  h.created_unix_ns = get<std::int64_t>(p, 88);
  h.block_size = get<std::uint32_t>(p, 96);
  if (h.cubin_size == 0 || h.cubin_size > max_cubin_bytes) return "cubin size " + std::to_string(h.cubin_size) + " out of range";
  if (h.codec() == entry_codec::lz4) {
    if (h.block_size == 0 || h.block_size > (1u << 30)) return "block size " + std::to_string(h.block_size) + " out of range";
    if (h.payload_size > max_payload(h.cubin_size, h.block_size))
      return "payload size " + std::to_string(h.payload_size) + " larger than LZ4 blocks can produce";
  } else {
    // Stored: the payload is the cubin, so its size and checksum are the cubin's.
    if (h.block_size != 0) return "block size " + std::to_string(h.block_size) + " in a stored entry";
    if (h.payload_size != h.cubin_size)
      return "payload size " + std::to_string(h.payload_size) + " is not the stored cubin's " + std::to_string(h.cubin_size);
    if (h.payload_xxh3 != h.cubin_xxh3) return std::string("payload and cubin checksums differ in a stored entry");
  }
  if (h.code_text_size > max_code_text || h.driver_text_size > max_driver_text)
    return std::string("key text sizes out of range");
  if (h.file_size() != file_size)
    return "file is " + std::to_string(file_size) + " bytes, its header says " + std::to_string(h.file_size()) +
           " (truncated or extended)";
  return std::nullopt;
}

std::optional<std::string> check_front(core::byte_span front, std::uint64_t file_size, const expected_key& want,
                                       entry_header& h, std::string& driver_text) {
  if (auto bad = parse_header(front, file_size, h)) return bad;
  if (front.size < h.payload_offset()) return std::string("key texts past the bytes read");
  // Up to this reader's minor, the header's bytes past its fields are the zero padding that aligns a
  // stored cubin (1.2); a later minor may give them meaning, and is not held to it.
  if (h.minor <= format_minor)
    for (std::size_t i = entry_header_size; i < h.header_size; ++i)
      if (front.data[i] != 0) return std::string("header padding is not zero");
  const std::uint8_t* p = front.data + h.header_size;
  const std::string code_text(reinterpret_cast<const char*>(p), h.code_text_size);
  driver_text.assign(reinterpret_cast<const char*>(p + h.code_text_size), h.driver_text_size);
  // Both the hash and the full text must match: a file renamed to another key's name, or a hash
  // collision, is never served.
  if (want.code && (h.code_hash != want.code->hash || code_text != want.code->text))
    return "entry holds another key (" + describe_code_text(code_text, 160) + ")";  // a planted text: up to 64 KiB
  if (want.driver && (h.driver_hash != want.driver->hash || driver_text != want.driver->text))
    return "entry is for driver " + quoted_excerpt(driver_text, 160) + ", not " + want.driver->text;  // planted: up to 4 KiB
  if (!want.driver && XXH3_64bits(driver_text.data(), driver_text.size()) != h.driver_hash)
    return std::string("driver text does not match its hash");
  return std::nullopt;
}

namespace {

// The checks every decoded or stored cubin gets: its checksum, its ELF SM against the header's and the key's.
// The SM is read from the ELF header alone: the checksum has just said these are the bytes the
// store parsed whole (encode_entry: cubin_sm_word) when it wrote the header's word, so a second
// walk of the sections (a fifth of a 1 MB hit's lookup) would find what it found then. The a/f
// variant, which only that walk reads (.nv.compat), is the header's.
std::optional<std::string> check_cubin(const entry_header& h, core::byte_span cubin, const expected_key& want) {
  if (cubin.size != h.cubin_size || core::xxh3(cubin) != h.cubin_xxh3)
    return std::string("cubin checksum mismatch");
  const std::uint32_t sm = core::cubin_header_sm(cubin);
  if (sm == 0 || sm != sm_arch(h.sm)) return std::string("cubin's SM (ELF e_flags) does not match the entry header");
  if (want.target_arch && sm != want.target_arch)
    return "cubin is for " + core::sm_name(sm, sm_variant(h.sm)) + ", the key wants " + core::sm_name(want.target_arch);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_stored_cubin(const entry_header& h, core::byte_span cubin, const expected_key& want) {
  if (h.codec() != entry_codec::stored) return std::string("not a stored entry");
  // One hash: the header says payload and cubin checksums are equal (parse_header checked it).
  return check_cubin(h, cubin, want);
}

std::optional<std::vector<std::uint8_t>> decode_entry(core::byte_span file, const expected_key& want,
                                                      entry_header& h, std::string& driver_text, std::string& problem) {
  if (auto bad = check_front(file, file.size, want, h, driver_text)) {
    problem = *bad;
    return std::nullopt;
  }
  const std::uint8_t* payload = file.data + h.payload_offset();
  if (h.codec() == entry_codec::stored) {
    if (auto bad = check_stored_cubin(h, core::byte_span(payload, h.payload_size), want)) {
      problem = *bad;
      return std::nullopt;
    }
    return std::vector<std::uint8_t>(payload, payload + h.payload_size);
  }
  if (core::xxh3(core::byte_span(payload, static_cast<std::size_t>(h.payload_size))) != h.payload_xxh3) {
    problem = "payload checksum mismatch";
    return std::nullopt;
  }
  std::vector<std::uint8_t> cubin(h.cubin_size);
  // Several threads only where there are cores to spare: on a 2-vCPU VM handing blocks to the
  // decode pool cost more than it saved (mid cubin: 460 us vs 357 us on one thread). Core's
  // decompress also keeps entries under 4 MiB on this thread: no pool is started on a hit.
  const unsigned hw = os::hardware_threads();
  const unsigned threads = hw >= 4 ? std::min(8u, hw) : 1u;
  if (auto st = core::decompress(core::codec::lz4, h.block_size, core::byte_span(payload, h.payload_size), cubin.data(),
                                 h.cubin_size, threads);
      !st) {
    problem = "LZ4 payload does not decode: " + st.error().message;
    return std::nullopt;
  }
  if (auto bad = check_cubin(h, core::byte_span(cubin.data(), cubin.size()), want)) {
    problem = *bad;
    return std::nullopt;
  }
  return cubin;
}

}  // namespace fatpack::detail::cache
