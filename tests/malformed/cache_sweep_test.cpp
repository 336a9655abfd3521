// The JIT cache's files damaged: entries (decode_entry, what every cache read runs) and the mapped
// index (index_file::map and its lock-free reads). An entry is covered entirely by its header check,
// its key texts and its checksums (docs/cache.md §3): every bit flip, smear and truncation must be
// refused. The index is advisory (§5): its identity (magic, version, capacity, generation) is covered
// by the header check and each slot's meaning by the slot check, while the counters, the last-use
// times and the use ticks are updated in place without a check by design; so a damaged identity must
// refuse the mapping, a damaged slot must never read as a different live slot, and a file of any
// other length must not map.
#include "sweep.hpp"

#include "cache/entry.hpp"
#include "cache/index.hpp"
#include "cache/key.hpp"

#include "fatpack/core/codec.hpp"

#include <algorithm>
#include <optional>
#include <tuple>

#include <unistd.h>

using namespace fatpack;
using namespace fatpack::detail::cache;
using namespace sweep;

namespace {

struct entry_subject {
  std::string name;
  full_key key;
  std::uint32_t arch = 0;
  bytes cubin, file;
};

const std::vector<entry_subject>& entries() {
  static const std::vector<entry_subject> v = [] {
    std::vector<entry_subject> out;
    for (auto codec : {entry_codec::lz4, entry_codec::stored})
    for (auto [file, arch] : {std::pair{"vadd.sm_90.cubin", 90u}, {"vadd.sm_75.cubin", 75u}, {"vadd.sm_100f.cubin", 100u}}) {
      entry_subject s;
      s.name = std::string(file) + (codec == entry_codec::lz4 ? " (LZ4)" : " (stored)");
      s.arch = arch;
      s.cubin = read_file(artifact(file));
      s.key.code = code_key_of_text(std::string("v1|culink|ptx=0123456789abcdef:1916|src=compute_80@9.0|cc=") +
                                    std::to_string(arch) + (arch == 100 ? "f" : "") + "|opt=");
      s.key.driver = make_driver_id(13000, "580.159.04");
      std::string why;
      auto enc = encode_entry(s.key, core::byte_span(s.cubin), 1764720000000000000ll, why, codec);
      REQUIRE_MESSAGE(enc.has_value(), why);
      s.file = *enc;
      out.push_back(std::move(s));
    }
    return out;
  }();
  return v;
}

// The cubin the bytes decode to under the subject's key (as a lookup by that key would), or nullopt
// with `problem`.
std::optional<bytes> decode(const entry_subject& s, const bytes& file, std::string& problem) {
  expected_key want;
  want.code = &s.key.code;
  want.driver = &s.key.driver;
  want.target_arch = s.arch;
  entry_header h;
  std::string driver_text;
  return decode_entry(core::byte_span(file), want, h, driver_text, problem);
}
bool decodes(const entry_subject& s, const bytes& file) {
  std::string problem;
  return decode(s, file, problem).has_value();
}

}  // namespace

TEST_CASE("cache entries: the undamaged entries decode to their cubins") {
  for (const auto& s : entries()) {
    CAPTURE(s.name);
    std::string problem;
    auto c = decode(s, s.file, problem);
    REQUIRE_MESSAGE(c.has_value(), problem);
    CHECK(*c == s.cubin);
  }
}

TEST_CASE("cache entries: bit flips, smears and truncations are refused") {
  counts flips{"cache entries: bit flips through decode_entry"}, smears{"cache entries: smears through decode_entry"},
      cuts{"cache entries: truncations through decode_entry"};
  for (const auto& s : entries()) {
    CAPTURE(s.name);
    entry_header h;
    REQUIRE(!parse_header(core::byte_span(s.file), s.file.size(), h));
    const std::size_t payload = h.header_size + h.code_text_size + h.driver_text_size;
    // Every bit of the header and the key texts; payload bits sampled (all in the full run).
    for_each_flip(s.file.size(), payload, [&](std::size_t bit) {
      must_refuse(flips, decodes(s, flipped(s.file, bit)), [&] { return doctest::String((s.name + ": bit " + std::to_string(bit)).c_str()); });
    }, 29);
    rng r(7);
    for (int i = 0; i < (full() ? 5000 : 300); ++i) {
      must_refuse(smears, decodes(s, smeared(s.file, payload, s.file.size(), r)),
                  [&] { return doctest::String((s.name + ": smear " + std::to_string(i)).c_str()); });
    }
    for_each_cut(s.file.size(), payload, [&](std::size_t len) {
      must_refuse(cuts, decodes(s, bytes(s.file.begin(), s.file.begin() + long(len))),
                  [&] { return doctest::String((s.name + ": cut at " + std::to_string(len)).c_str()); });
    });
    // Bytes appended are refused too (the header states the file's size).
    bytes longer = s.file;
    longer.push_back(0);
    CHECK_FALSE(decodes(s, longer));
  }
}

namespace {

// Slot field offsets (docs/cache.md §5; runtime/src/cache/index.cpp): seq 0, state 4, code 8,
// driver 24, bytes 32 (checked: 4..36), last use 36, tick 40 (unchecked, relaxed), check 44.
constexpr std::size_t slot_checked_end = 36, slot_check_at = 44;
constexpr std::size_t header_checked = 32;  // magic, version, capacity, generation, the check

std::string temp_path() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/fatpack-malformed-XXXXXX";
    REQUIRE(mkdtemp(tmpl));
    return std::string(tmpl);
  }();
  return dir + "/index.v1";
}

struct index_subject {
  bytes file;
  std::vector<index_slot> slots;
};

const index_subject& index_file_bytes() {
  static const index_subject s = [] {
    index_subject s;
    for (std::uint8_t i = 1; i <= 6; ++i) {
      index_slot sl;
      for (std::size_t k = 0; k < 16; ++k) sl.code[k] = std::uint8_t(i * 37 + k);
      sl.driver = 0x1000 + i;
      sl.disk_bytes = 1000u * i;
      sl.last_use_s = 1764720000u + i;
      sl.tick = i;
      s.slots.push_back(sl);
    }
    REQUIRE(index_file::create(temp_path(), s.slots, 16, 1764720000) == 0);
    s.file = read_file(temp_path());
    return s;
  }();
  return s;
}

using slot_id = std::tuple<std::array<std::uint8_t, 16>, std::uint64_t, std::uint32_t>;
slot_id id(const index_slot& s) { return {s.code, s.driver, s.disk_bytes}; }

// Maps the bytes as an index file: nullptr when refused.
std::unique_ptr<index_file> map_bytes(const bytes& b) {
  const std::string p = temp_path();
  FILE* f = std::fopen(p.c_str(), "wb");
  REQUIRE(f);
  if (!b.empty()) REQUIRE(std::fwrite(b.data(), 1, b.size(), f) == b.size());
  std::fclose(f);
  std::string why;
  return index_file::map(p, false, why);
}

}  // namespace

TEST_CASE("cache index: bit flips never make a wrong slot, and damaged identities refuse the mapping") {
  const auto& s = index_file_bytes();
  {
    auto idx = map_bytes(s.file);
    REQUIRE(idx);
    REQUIRE(idx->live_slots().size() == s.slots.size());
  }
  std::vector<slot_id> original;
  for (const auto& sl : s.slots) original.push_back(id(sl));
  counts header{"cache index: header bit flips through map"}, slots{"cache index: slot bit flips through reads"};
  const std::size_t first_slot = index_header_bytes;
  for (std::size_t bit = 0; bit < s.file.size() * 8; ++bit) {
    const std::size_t byte = bit / 8;
    // CI: every bit of the checked header and of the slots, every 17th bit of the rest of the header.
    if (!full() && byte >= header_checked && byte < first_slot && bit % 17 != 0) continue;
    auto idx = map_bytes(flipped(s.file, bit));
    if (byte < first_slot) {
      ++header.cases;
      if (!idx) {
        ++header.rejected;
        if (byte >= header_checked) FAIL_CHECK("header byte " << byte << " (unchecked counters) flipped: refused");
      } else {
        ++header.accepted;
        if (byte < header_checked) FAIL_CHECK("checked header byte " << byte << " flipped: mapped");
        else ++header.accepted_expected;  // counters and reserved bytes: advisory, updated in place
      }
      continue;
    }
    ++slots.cases;
    REQUIRE_MESSAGE(idx, "slot byte " << byte << " flipped: the mapping was refused");
    const std::size_t rel = (byte - first_slot) % index_slot_bytes;
    const auto live = idx->live_slots();
    bool wrong = false;
    for (const auto& l : live) wrong = wrong || std::find(original.begin(), original.end(), id(l)) == original.end();
    if (wrong) FAIL_CHECK("slot byte " << byte << " flipped: a slot that was never written reads as live");
    const bool checked = (rel == 0 && bit % 8 == 0) || (rel >= 4 && rel < slot_checked_end) || rel >= slot_check_at;
    // A live slot damaged in a checked field drops out (the index is rebuilt; entries decide).
    const std::size_t slot_no = (byte - first_slot) / index_slot_bytes;
    const std::uint8_t* p = s.file.data() + first_slot + slot_no * index_slot_bytes;
    const bool was_live = p[4] == 1;
    if (was_live && checked && live.size() == s.slots.size()) {
      FAIL_CHECK("slot byte " << byte << " (checked) flipped: the slot still reads as live");
    }
    if (live.size() < s.slots.size() || (was_live && checked)) ++slots.rejected;
    else {
      ++slots.accepted;
      ++slots.accepted_expected;  // an empty slot's ignored bytes, the sequence's even bits, use times
    }
  }
}

TEST_CASE("cache index: every other length is refused") {
  const auto& s = index_file_bytes();
  counts cuts{"cache index: truncations through map"};
  for_each_cut(s.file.size(), 64, [&](std::size_t len) {
    must_refuse(cuts, map_bytes(bytes(s.file.begin(), s.file.begin() + long(len))) != nullptr,
                [&] { return doctest::String(("cut at " + std::to_string(len)).c_str()); });
  }, 7);
  bytes longer = s.file;
  longer.resize(longer.size() + index_slot_bytes, 0);  // one slot more than its capacity says
  CHECK_FALSE(map_bytes(longer));
}
