// Package format v1 (docs/format.md): writer -> reader round trips on real nvcc output, and a
// reader that rejects every kind of damage with an error naming the field.
#include "fatpack/core/package.hpp"
#include "fatpack/core/package_writer.hpp"
#include "fatpack/core/ptx_split.hpp"
#include "fatpack/core/input.hpp"

#include "../../core/src/format/package_layout.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <fstream>
#include <iterator>

using namespace fatpack::core;

namespace {

std::vector<std::uint8_t> read_artifact(const std::string& name) {
  std::ifstream f(std::string(FATPACK_TEST_ARTIFACTS) + "/" + name, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "missing test artifact " << name);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

entry_input make_entry(const std::string& file, target t, ptx_isa isa = {}) {
  entry_input e;
  e.target = t;
  e.ptx_isa = isa;
  e.toolkit_version = 13000;
  e.module_name = "vadd";
  e.kernels = {"saxpy", "vadd"};
  e.raw = read_artifact(file);
  e.origin = file;
  return e;
}

std::vector<entry_input> real_entries() {
  return {make_entry("vadd.sm_75.cubin", {entry_kind::sass, 75, arch_variant::plain}),
          make_entry("vadd.sm_80.cubin", {entry_kind::sass, 80, arch_variant::plain}),
          make_entry("vadd.sm_90.cubin", {entry_kind::sass, 90, arch_variant::plain}),
          make_entry("vadd.sm_90a.cubin", {entry_kind::sass, 90, arch_variant::arch_specific}),
          make_entry("vadd.compute_90.ptx", {entry_kind::ptx, 90, arch_variant::plain}, {9, 0})};
}

std::vector<std::uint8_t> build(codec c) {
  pack_options o;
  o.codec = c;
  o.block_size = c == codec::none ? 0 : 2048;  // small blocks: exercise multi-block entries
  auto r = write_package("kernels", real_entries(), o);
  REQUIRE(r);
  return std::move(r).value();
}

// Rewrites the tables checksum after a deliberate edit, so a test reaches the check it targets.
void reseal(std::vector<std::uint8_t>& pkg) {
  using namespace layout;
  const std::uint64_t end = get64(&pkg[h_string_offset]) + get64(&pkg[h_string_size]);
  put64(&pkg[h_tables_xxh3], 0);
  put64(&pkg[h_tables_xxh3], xxh3(byte_span(pkg.data(), std::size_t(end))));
}

error parse_error(const std::vector<std::uint8_t>& pkg) {
  auto r = package_view::parse(byte_span(pkg), "bad.fpk");
  REQUIRE_FALSE(r);
  return r.error();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a package head, the entry's bytes and zeros to 64 are the codec-none package, byte for byte") {
  for (const auto& e : real_entries()) {
    CAPTURE(e.origin);
    pack_options o;
    o.codec = codec::none;
    auto whole = write_package_lz4("kernels", {e}, o);
    REQUIRE(whole);
    auto head = write_package_head("kernels", e);
    REQUIRE(head);
    CHECK(head.value().size() % 64 == 0);
    std::vector<std::uint8_t> made((head.value().size() + e.raw.size() + 63) / 64 * 64, 0);
    std::copy(head.value().begin(), head.value().end(), made.begin());
    std::copy(e.raw.begin(), e.raw.end(), made.begin() + std::ptrdiff_t(head.value().size()));
    CHECK(made == whole.value());
    auto view = package_view::parse(byte_span(made), "made.fpk");
    REQUIRE(view);
    CHECK(view.value().entries().at(0).payload_offset == head.value().size());
    // A hash the caller checked already is taken, not computed again (a wrong one is the caller's
    // error, and verify finds it).
    entry_input known = e;
    known.known_xxh3 = xxh3(byte_span(e.raw));
    CHECK(write_package_head("kernels", known).value() == head.value());
    known.known_xxh3 = 12345;
    auto lied = write_package_head("kernels", known);
    REQUIRE(lied);
    CHECK(lied.value() != head.value());
  }
}

TEST_CASE("real nvcc output round-trips through every codec, byte for byte") {
  const auto inputs = real_entries();
  for (codec c : {codec::none, codec::lz4, codec::zstd}) {
    CAPTURE(codec_name(c));
    const auto pkg = build(c);
    CHECK(pkg.size() % payload_alignment == 0);
    auto pv = package_view::parse(byte_span(pkg), "kernels.fpk");
    REQUIRE_MESSAGE(pv, pv.error().message);
    CHECK(pv->name() == "kernels");
    CHECK(pv->version_major() == 1);
    CHECK(pv->total_size() == pkg.size());
    REQUIRE(pv->entries().size() == inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const entry_info& e = pv->entries()[i];
      CHECK(e.target == inputs[i].target);
      CHECK(e.ptx_isa == inputs[i].ptx_isa);
      CHECK(e.toolkit_version == 13000);
      CHECK(e.module_name == "vadd");
      REQUIRE(e.kernels.size() == 2);
      CHECK(e.kernels[0] == "saxpy");
      CHECK(e.kernels[1] == "vadd");
      CHECK(e.payload_offset % payload_alignment == 0);
      CHECK(e.codec == c);
      auto raw = pv->decompress(i, 2);
      REQUIRE_MESSAGE(raw, raw.error().message);
      CHECK(*raw == inputs[i].raw);
      if (c != codec::none) CHECK(e.stored_size < e.raw_size);
    }
    CHECK(pv->verify());
  }
}

TEST_CASE("the writer is deterministic and refuses duplicates and empty names") {
  CHECK(build(codec::lz4) == build(codec::lz4));
  auto entries = real_entries();
  entries.push_back(entries[0]);
  auto dup = write_package("kernels", entries, {});
  REQUIRE_FALSE(dup);
  CHECK(contains(dup.error().message, "already has an entry for sm_75"));
  CHECK_FALSE(write_package("", real_entries(), {}));
  CHECK_FALSE(write_package("x", {}, {}));
  // The same PTX target with two ISA versions is allowed: old drivers get the older one.
  entries = real_entries();
  entries.push_back(make_entry("vadd.compute_90.ptx", {entry_kind::ptx, 90, arch_variant::plain}, {8, 0}));
  CHECK(write_package("kernels", entries, {}));
}

TEST_CASE("concatenated packages and packages embedded in other bytes are found") {
  const auto a = build(codec::lz4);
  auto b_entries = real_entries();
  b_entries.resize(2);
  auto b = write_package("second", b_entries, {});
  REQUIRE(b);
  std::vector<std::uint8_t> both = a;
  both.insert(both.end(), b->begin(), b->end());
  auto all = parse_packages(byte_span(both), "both.fpk");
  REQUIRE_MESSAGE(all, all.error().message);
  REQUIRE(all->size() == 2);
  CHECK((*all)[0].name() == "kernels");
  CHECK((*all)[1].name() == "second");
  CHECK((*all)[1].entries().size() == 2);

  // One padding rule for every walker (docs/format.md §2): a zero tail after a package ends the
  // list (the runtime's registry always accepted it; `fatpack inspect` used to reject it) ...
  std::vector<std::uint8_t> padded = both;
  padded.resize(both.size() + 100, 0);
  auto with_tail = parse_packages(byte_span(padded), "padded.fpk");
  REQUIRE_MESSAGE(with_tail, with_tail.error().message);
  CHECK(with_tail->size() == 2);
  // ... anything else after a package is an error naming its offset ...
  padded.back() = 1;
  auto junk = parse_packages(byte_span(padded), "junk.fpk");
  REQUIRE_FALSE(junk);
  CHECK(contains(junk.error().message, "junk.fpk+0x"));
  // ... and zeros alone are no package.
  CHECK_FALSE(parse_packages(byte_span(std::vector<std::uint8_t>(128, 0)), "zeros.fpk"));
  std::size_t seen = 0;
  CHECK(for_each_package(byte_span(both), "both.fpk", [&](package_view&&) {
    ++seen;
    return status{};
  }));
  CHECK(seen == 2);

  // Embedded at an 8-byte aligned offset inside unrelated bytes, next to a decoy magic.
  std::vector<std::uint8_t> host(4096, 0x90);
  host.insert(host.end(), std::begin(package_magic), std::end(package_magic));  // decoy: no valid header
  host.resize(8192, 0);
  const std::size_t at = host.size();
  host.insert(host.end(), a.begin(), a.end());
  host.resize(host.size() + 100, 0xCC);
  std::vector<error> skipped;
  const auto found = find_embedded_packages(byte_span(host), &skipped);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == at);
  CHECK(skipped.size() == 1);
}

TEST_CASE("a package in a member of an ar archive is found (members start at even, not 8-aligned, offsets)") {
  const auto a = build(codec::lz4);
  // One ar member: the 60-byte header (name, date, uid, gid, mode, decimal size at 48, "`\n"), the
  // data, a pad byte to an even offset.
  auto member = [](std::string& ar, const std::string& name, const std::string& data) {
    char header[61];
    std::snprintf(header, sizeof header, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name.c_str(), "0", "0", "0", "644",
                  data.size());
    ar += std::string(header, 60) + data;
    if (data.size() & 1) ar += '\n';
  };
  auto bytes = [](const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); };
  // An object whose package section is 64-aligned within it, as an embedded package is.
  const std::string object = std::string(64, '\x90') + std::string(a.begin(), a.end()) + std::string(24, '\0');
  std::string ar = "!<arch>\n";
  member(ar, "first.o/", "abc");  // odd: the next member's data starts 4 past an 8-aligned offset
  const std::size_t data_at = ar.size() + 60;
  member(ar, "kernels.o/", object);
  REQUIRE((data_at + 64) % 8 != 0);
  const auto archive = bytes(ar);
  const auto found = find_embedded_packages(byte_span(archive));
  REQUIRE(found.size() == 1);
  CHECK(found[0] == data_at + 64);
  // A BSD long name ("#1/<n>": the name is the first n bytes of the data) moves the object's start.
  std::string bsd = "!<arch>\n";
  member(bsd, "#1/14", "kernels_long.o" + object);
  const auto bsd_archive = bytes(bsd);
  const auto found_bsd = find_embedded_packages(byte_span(bsd_archive));
  REQUIRE(found_bsd.size() == 1);
  CHECK(found_bsd[0] == 8 + 60 + 14 + 64);
  // A damaged member header: the whole file is scanned as before (nothing at an aligned offset here).
  auto damaged = archive;
  damaged[8 + 58] = 'x';
  CHECK(find_embedded_packages(byte_span(damaged)).empty());
}

TEST_CASE("two packages of one name in one file are refused, naming both") {
  const auto a = build(codec::lz4);
  auto other_entries = real_entries();
  other_entries.resize(1);
  auto b = write_package("kernels", other_entries, {});  // the same name as `a`, other content
  REQUIRE(b);
  std::vector<std::uint8_t> both = a;
  both.insert(both.end(), b->begin(), b->end());
  auto all = parse_packages(byte_span(both), "both.fpk");
  REQUIRE_FALSE(all);
  CHECK(contains(all.error().message, "both.fpk+0x"));
  CHECK(contains(all.error().message, "a second package named 'kernels' (the first is both.fpk)"));
  // Found by the embedded scan: the same rule.
  std::vector<package_view> views;
  for (const auto off : find_embedded_packages(byte_span(both)))
    views.push_back(package_view::parse(byte_span(both).subspan(std::size_t(off), both.size() - std::size_t(off)), "x").value());
  REQUIRE(views.size() == 2);
  CHECK_FALSE(check_unique_names(views));
  views.pop_back();
  CHECK(check_unique_names(views));
}

TEST_CASE("the embedded-package scan is linear: fake headers that each claim the rest of the file") {
  using namespace layout;
  // 16 MiB with a header every 64 bytes that passes every check before the table checksum and
  // declares its tables to run to the end: a quadratic scan hashes ~2 TB here (hours).
  const std::size_t size = std::size_t(16) << 20;
  std::vector<std::uint8_t> host(size, 0);
  for (std::size_t pos = 0; pos + header_size_v1 <= size; pos += 64) {
    std::uint8_t* h = host.data() + pos;
    std::memcpy(h, package_magic, sizeof package_magic);
    put16(h + h_major, format_major);
    put32(h + h_header_size, header_size_v1);
    const std::uint64_t total = (size - pos) / 64 * 64;
    put64(h + h_total_size, total);
    put64(h + h_entry_offset, header_size_v1);
    put32(h + h_entry_count, 0);
    put32(h + h_entry_size, entry_size_v1);
    put64(h + h_string_offset, header_size_v1);
    put64(h + h_string_size, total - header_size_v1);
  }
  // A real package after the fake region is still found: the claims end before it.
  const auto real = build(codec::lz4);
  const std::size_t at = host.size();
  host.insert(host.end(), real.begin(), real.end());
  std::vector<error> skipped;
  std::uint64_t work = 0;
  const auto found = find_embedded_packages(byte_span(host), &skipped, &work);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == at);
  CHECK_FALSE(skipped.empty());
  // Steps, not time: what the parses could examine stays within the input (plus the magic probes).
  CHECK(work <= host.size() + 8 * (host.size() / 8));
  CHECK(work >= size);  // the counter counts: the first fake claims the whole fake region
}

TEST_CASE("damaged packages are rejected with an error naming the field") {
  using namespace layout;
  const auto good = build(codec::lz4);
  const std::uint64_t e0 = header_size_v1;  // first entry record

  SUBCASE("empty and short input") {
    CHECK(parse_error({}).reason == errc::truncated);
    std::vector<std::uint8_t> tiny(good.begin(), good.begin() + 40);
    CHECK(parse_error(tiny).reason == errc::truncated);
  }
  SUBCASE("wrong magic") {
    auto bad = good;
    bad[1] = 'X';
    CHECK(parse_error(bad).reason == errc::bad_magic);
  }
  SUBCASE("unknown major version") {
    auto bad = good;
    put16(&bad[h_major], 2);
    const error e = parse_error(bad);
    CHECK(e.reason == errc::unsupported_version);
    CHECK(contains(e.message, "format version 2.0"));
  }
  SUBCASE("truncated package") {
    std::vector<std::uint8_t> bad(good.begin(), good.end() - 64);
    const error e = parse_error(bad);
    CHECK(e.reason == errc::truncated);
    CHECK(contains(e.message, "total_size"));
  }
  SUBCASE("tables checksum") {
    auto bad = good;
    bad[e0 + e_arch] ^= 1;
    const error e = parse_error(bad);
    CHECK(e.reason == errc::checksum);
    CHECK(contains(e.message, "checksum"));
  }
  SUBCASE("payload offset past the end") {
    auto bad = good;
    put64(&bad[e0 + e_payload_offset], good.size() + 64 * 10);
    reseal(bad);
    const error e = parse_error(bad);
    CHECK(e.reason == errc::malformed);
    CHECK(contains(e.message, "entry 0 (sm_75, module 'vadd')"));
    CHECK(contains(e.message, "payload"));
  }
  SUBCASE("raw size beyond what the codec can decode from the stored bytes") {
    // Within the block-count bound (one block of 2048 raw bytes per 4 stored bytes), but more than
    // LZ4 can expand the entry's data bytes: forged. Accepted by parse before, then a large allocation.
    const std::uint64_t stored = get64(&good[e0 + e_stored_size]), blocks_room = stored / 4;
    auto bad = good;
    put64(&bad[e0 + e_raw_size], blocks_room * 2048);
    reseal(bad);
    const error e = parse_error(bad);
    CHECK(e.reason == errc::malformed);
    CHECK(contains(e.message, "more than lz4 can decode"));
  }
  SUBCASE("stored size past the end") {
    auto bad = good;
    put64(&bad[e0 + e_stored_size], ~std::uint64_t(0) - 8);
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "stored_size"));
  }
  SUBCASE("misaligned payload") {
    auto bad = good;
    put64(&bad[e0 + e_payload_offset], get64(&bad[e0 + e_payload_offset]) + 8);
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "aligned"));
  }
  SUBCASE("entry table past the end") {
    auto bad = good;
    put32(&bad[h_entry_count], 0x7fffffff);
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "entry table"));
  }
  SUBCASE("string reference out of range") {
    auto bad = good;
    put32(&bad[e0 + e_module_offset], 1u << 30);
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "module name"));
  }
  SUBCASE("unknown kind and codec") {
    auto bad = good;
    bad[e0 + e_kind] = 9;
    reseal(bad);
    CHECK(parse_error(bad).reason == errc::unknown_kind);
    bad = good;
    bad[e0 + e_codec] = 7;
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "codec"));
  }
  SUBCASE("kernel count mismatch") {
    auto bad = good;
    put32(&bad[e0 + e_kernel_count], 3);
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "kernel_count"));
  }
  SUBCASE("nonzero padding and reserved fields") {
    auto bad = good;
    bad[bad.size() - 1] = 1;  // trailing padding of the last payload
    CHECK(contains(parse_error(bad).message, "padding"));
    bad = good;
    bad[e0 + 0x70] = 1;
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "reserved"));
  }
  SUBCASE("forged raw_size cannot force a huge allocation") {
    auto bad = good;
    put64(&bad[e0 + e_raw_size], std::uint64_t(1) << 40);
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "raw_size"));
  }
  SUBCASE("a block_size above the writers' 1 GiB limit is rejected") {
    // Before: accepted, so raw_size could claim up to stored_size / 4 blocks of 4 GiB each.
    auto bad = good;
    put32(&bad[e0 + e_block_size], 0x80000000u);
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "exceeds 1 GiB"));
  }
  SUBCASE("payload damage is caught when the entry is read") {
    auto bad = good;
    auto pv = package_view::parse(byte_span(good), "x");
    REQUIRE(pv);
    bad[std::size_t(pv->entries()[2].payload_offset + 20)] ^= 0xFF;
    auto pv2 = package_view::parse(byte_span(bad), "bad.fpk");
    REQUIRE(pv2);  // tables are intact
    auto raw = pv2->decompress(2);
    REQUIRE_FALSE(raw);
    CHECK(raw.error().reason == errc::checksum);
    CHECK(contains(raw.error().message, "bad.fpk: entry 2 (sm_90, module 'vadd')"));
    CHECK_FALSE(pv2->verify());
  }
}

TEST_CASE("a future minor version with larger records and unknown fields still reads") {
  using namespace layout;
  // Rebuild the package by hand with header_size 192 and entry_size 160, minor 3, junk in the new
  // fields: what a v1.3 writer might produce.
  const auto v10 = build(codec::lz4);
  auto pv = package_view::parse(byte_span(v10), "v10");
  REQUIRE(pv);
  const std::uint32_t hs = 192, es = 160, n = std::uint32_t(pv->entries().size());
  const std::uint64_t old_strings = get64(&v10[h_string_offset]), ssize = get64(&v10[h_string_size]);
  const std::uint64_t new_strings = hs + std::uint64_t(es) * n;
  const std::uint64_t shift = align_up(new_strings + ssize, 64) - align_up(old_strings + ssize, 64);
  std::vector<std::uint8_t> v13(v10.size() + shift, 0);
  std::memcpy(v13.data(), v10.data(), header_size_v1);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::memcpy(&v13[hs + i * es], &v10[header_size_v1 + i * entry_size_v1], entry_size_v1);
    put64(&v13[hs + i * es + e_payload_offset], get64(&v10[header_size_v1 + i * entry_size_v1 + e_payload_offset]) + shift);
    v13[hs + i * es + 150] = 0xAB;  // a field v1.0 does not know
  }
  std::memcpy(&v13[new_strings], &v10[old_strings], std::size_t(ssize));
  const std::uint64_t old_payloads = align_up(old_strings + ssize, 64);
  std::memcpy(&v13[old_payloads + shift], &v10[old_payloads], std::size_t(v10.size() - old_payloads));
  put16(&v13[h_minor], 3);
  put32(&v13[h_header_size], hs);
  put64(&v13[h_total_size], v13.size());
  put64(&v13[h_entry_offset], hs);
  put32(&v13[h_entry_size], es);
  put64(&v13[h_string_offset], new_strings);
  put64(&v13[h_flags], 0x10);
  v13[0x90] = 0xCD;  // a header field v1.0 does not know
  reseal(v13);
  auto r = package_view::parse(byte_span(v13), "v13.fpk");
  REQUIRE_MESSAGE(r, r.error().message);
  CHECK(r->version_minor() == 3);
  CHECK(r->entries().size() == n);
  CHECK(r->verify());
  // The same bytes claiming to be v1.0 are rejected: reserved fields must be zero there.
  put16(&v13[h_minor], 0);
  reseal(v13);
  CHECK_FALSE(package_view::parse(byte_span(v13), "v13.fpk"));
}

// Format 1.1 link groups (docs/format.md §4.1): relocatable PTX of one module JIT-linked together.
TEST_CASE("link groups: written as format 1.1, read back, malformed groups refused by writer and reader") {
  auto part = [](const std::string& file, std::uint16_t k, std::uint16_t n) {
    entry_input e;
    e.target = {entry_kind::ptx, 90, arch_variant::plain};
    e.ptx_isa = {9, 0};
    e.module_name = "rdc";
    e.raw = read_artifact(file);
    e.origin = file;
    e.link_part = k;
    e.link_parts = n;
    return e;
  };
  std::vector<entry_input> entries = {make_entry("vadd.sm_90.cubin", {entry_kind::sass, 90, arch_variant::plain}),
                                      part("rdc_kernel.compute_90.rdc.ptx", 0, 2),
                                      part("rdc_device.compute_90.rdc.ptx", 1, 2)};
  entries[0].module_name = "rdc";
  pack_options o;
  auto pkg = write_package("kernels", entries, o);
  REQUIRE_MESSAGE(pkg, pkg.error().message);
  auto pv = package_view::parse(byte_span(*pkg), "rdc.fpk");
  REQUIRE_MESSAGE(pv, pv.error().message);
  CHECK(pv->version_minor() == 1);
  REQUIRE(pv->entries().size() == 3);
  CHECK_FALSE(pv->entries()[0].in_link_group());
  CHECK(pv->entries()[1].link_part == 0);
  CHECK(pv->entries()[1].link_parts == 2);
  CHECK(pv->entries()[1].selectable());
  CHECK(pv->entries()[2].link_part == 1);
  CHECK_FALSE(pv->entries()[2].selectable());
  CHECK(pv->verify());

  // Without a group the writer still writes 1.0 (a package v1.0 readers read exactly as before).
  auto plain = write_package("kernels", {entries[0]}, o);
  REQUIRE(plain);
  CHECK(package_view::parse(byte_span(*plain), "plain.fpk")->version_minor() == 0);

  SUBCASE("writer: a part out of order, a lone part, mixed targets, SASS in a group") {
    auto swapped = entries;
    std::swap(swapped[1], swapped[2]);
    auto r = write_package("kernels", swapped, o);
    REQUIRE_FALSE(r);
    CHECK(contains(r.error().message, "does not follow part 0"));
    auto lone = entries;
    lone.pop_back();
    r = write_package("kernels", lone, o);
    REQUIRE_FALSE(r);
    CHECK(contains(r.error().message, "runs past the last entry"));
    auto mixed = entries;
    mixed[2].ptx_isa = {8, 8};
    r = write_package("kernels", mixed, o);
    REQUIRE_FALSE(r);
    CHECK(contains(r.error().message, "differs from part 0"));
    std::vector<entry_input> sass = {entries[0], entries[1]};
    sass[0].link_parts = 2;
    sass[1].link_part = 1;
    r = write_package("kernels", sass, o);
    REQUIRE_FALSE(r);
    CHECK(contains(r.error().message, "PTX or LTO-IR entries, not SASS"));
  }
  SUBCASE("reader: a forged group (resealed tables) is refused naming the entry") {
    using namespace layout;
    const std::size_t e2 = header_size_v1 + 2 * entry_size_v1;
    auto bad = *pkg;
    put16(&bad[e2 + e_link_part], 0);  // two "first parts"
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "entry 2 (compute_90, module 'rdc'): expected part 1"));
    bad = *pkg;
    put16(&bad[e2 + e_link_parts], 1);
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "expected part 1 of the link group of 2"));
    bad = *pkg;
    put16(&bad[h_minor], 0);  // a v1.0 package must keep the fields zero
    reseal(bad);
    CHECK(contains(parse_error(bad).message, "reserved entry fields are not zero"));
  }
}

// Format 1.2 (docs/format.md §4.2): piece plans.
namespace {

std::vector<std::uint8_t> plan_package(entry_input& ptx) {
  ptx.plan = make_piece_plan(byte_span(ptx.raw), ptx.kernels, ptx.origin);
  auto r = write_package("plans", {ptx}, pack_options{});
  REQUIRE(r);
  return std::move(r).value();
}

entry_input varied_ptx() {
  entry_input e;
  e.target = {entry_kind::ptx, 80, arch_variant::plain};
  e.ptx_isa = {9, 0};
  e.module_name = "varied";
  e.raw = read_artifact("split/varied.plain.sm_80.ptx");
  e.origin = "varied.plain.sm_80.ptx";
  auto info = parse_ptx(byte_span(e.raw), e.origin);
  REQUIRE(info);
  e.kernels = info->kernels;
  return e;
}

}  // namespace

TEST_CASE("a piece plan is written, read back whole, and rebuilds each piece byte for byte") {
  entry_input e = varied_ptx();
  const auto pkg = plan_package(e);
  REQUIRE(e.plan.pieces.size() == 12);
  auto view = package_view::parse(byte_span(pkg), "plans.fpk");
  REQUIRE_MESSAGE(view, (view ? "" : view.error().message));
  CHECK(view->version_minor() == format_minor_piece_plans);
  const entry_info& got = view->entries().at(0);
  REQUIRE(got.plan.pieces.size() == 12);
  CHECK(got.plan.header_end == e.plan.header_end);
  auto split = split_ptx(byte_span(e.raw), "varied");
  REQUIRE(split);
  const std::string_view text(reinterpret_cast<const char*>(e.raw.data()), e.raw.size());
  std::set<std::uint32_t> kernels;
  for (std::size_t i = 0; i < 12; ++i) {
    const auto& p = got.plan.pieces[i];
    const std::string made = assemble_ptx_piece(text, got.plan.header_end, p.ranges);
    CHECK(made == split->pieces[i].text);
    CHECK(p.size == made.size());
    CHECK(p.xxh3 == xxh3(byte_span(made)));
    CHECK(p.globals == split->pieces[i].globals);
    for (std::uint32_t k : p.kernels) {
      CHECK(kernels.insert(k).second);
      CHECK(std::find(split->pieces[i].kernels.begin(), split->pieces[i].kernels.end(), std::string(got.kernels.at(k))) !=
            split->pieces[i].kernels.end());
    }
  }
  CHECK(kernels.size() == got.kernels.size());
  // A package without plans (or link groups) is still written as 1.0.
  entry_input sass = make_entry("vadd.sm_80.cubin", {entry_kind::sass, 80, arch_variant::plain});
  auto plain = write_package("plain", {sass}, pack_options{});
  REQUIRE(plain);
  CHECK(package_view::parse(byte_span(*plain), "plain.fpk")->version_minor() == format_minor_plain);
}

TEST_CASE("a damaged piece plan is refused, naming the entry and what is wrong") {
  entry_input e = varied_ptx();
  const auto good = plan_package(e);
  using namespace layout;
  const std::uint64_t e0 = get32(&good[h_header_size]);
  const std::uint64_t strings = get64(&good[h_string_offset]);
  const std::uint64_t plan = strings + get32(&good[e0 + e_plan_offset]);
  const std::uint32_t plan_size = get32(&good[e0 + e_plan_size]);
  REQUIRE(plan_size > 16);
  auto refused = [&](std::vector<std::uint8_t> bad, const std::string& what) {
    reseal(bad);
    const error err = parse_error(bad);
    CHECK(err.reason == errc::malformed);
    CHECK_MESSAGE(contains(err.message, "entry 0 (compute_80, module 'varied')"), err.message);
    CHECK_MESSAGE(contains(err.message, what), err.message);
  };
  SUBCASE("one piece") {
    auto bad = good;
    put32(&bad[plan], 1);
    refused(bad, "holds 1 pieces");
  }
  SUBCASE("a range past the entry") {
    auto bad = good;
    put64(&bad[plan + 16 + 32 + 8], e.raw.size() + 1);  // piece 0, range 0, its end
    refused(bad, "is not inside the entry");
  }
  SUBCASE("a size its ranges do not make") {
    auto bad = good;
    put64(&bad[plan + 16 + 8], get64(&good[plan + 16 + 8]) + 1);
    refused(bad, "is not what its ranges make");
  }
  SUBCASE("a kernel in two pieces") {
    // Piece 0 has 1 range and 1 kernel; piece 1 starts after them. Its kernel index := piece 0's.
    const std::uint64_t p0_kernel = plan + 16 + 32 + 16 * get32(&good[plan + 16 + 16]);
    auto bad = good;
    const std::uint64_t p1 = p0_kernel + 4 * get32(&good[plan + 16 + 20]);
    std::uint64_t g = p1;  // skip piece 0's globals
    for (std::uint32_t n = get32(&good[plan + 16 + 24]); n; --n) g += 4 + get32(&good[g]);
    const std::uint64_t p1_kernel = g + 32 + 16 * get32(&good[g + 16]);
    put32(&bad[p1_kernel], get32(&good[p0_kernel]));
    refused(bad, "in two pieces");
  }
  SUBCASE("a plan on a SASS entry") {
    entry_input sass = make_entry("vadd.sm_80.cubin", {entry_kind::sass, 80, arch_variant::plain});
    entry_input p = varied_ptx();
    auto two = write_package("two", {sass, [&] { p.plan = make_piece_plan(byte_span(p.raw), p.kernels, "v"); return p; }()}, pack_options{});
    REQUIRE(two);
    auto bad = *two;
    const std::uint64_t e1 = e0 + get32(&bad[h_entry_size]);
    put32(&bad[e0 + e_plan_offset], get32(&bad[e1 + e_plan_offset]));
    put32(&bad[e0 + e_plan_size], get32(&bad[e1 + e_plan_size]));
    reseal(bad);
    const error err = parse_error(bad);
    CHECK(err.reason == errc::malformed);
    CHECK(contains(err.message, "not standalone PTX"));
  }
}

TEST_CASE("a piece plan that names a kernel or a global twice is refused, and so is a plan_offset without a plan") {
  using namespace layout;
  SUBCASE("two kernels of one name (the entry's kernel list)") {
    entry_input e = varied_ptx();
    auto bad = plan_package(e);
    // _Z7count_bPi becomes a second _Z7count_aPi in the kernel list (the string table), same length.
    const std::uint64_t strings = get64(&bad[h_string_offset]), size = get64(&bad[h_string_size]);
    const std::string table(reinterpret_cast<const char*>(&bad[strings]), std::size_t(size));
    const std::size_t at = table.find(std::string("_Z7count_bPi") + '\0');
    REQUIRE(at != std::string::npos);
    bad[strings + at + 9] = 'a';
    reseal(bad);
    const error err = parse_error(bad);
    CHECK(err.reason == errc::malformed);
    CHECK_MESSAGE(contains(err.message, "entry 0 (compute_80, module 'varied')"), err.message);
    CHECK_MESSAGE(contains(err.message, "names '_Z7count_aPi' twice"), err.message);
  }
  SUBCASE("a global named like a kernel of another piece: the writer (which checks as a reader does) refuses it") {
    entry_input e = varied_ptx();
    e.plan = make_piece_plan(byte_span(e.raw), e.kernels, e.origin);
    REQUIRE(e.plan.pieces.size() == 12);
    const std::string kernel = e.kernels.at(e.plan.pieces[0].kernels.at(0));
    e.plan.pieces[1].globals.push_back(kernel);
    auto r = write_package("plans", {e}, pack_options{});
    REQUIRE_FALSE(r);
    CHECK_MESSAGE(contains(r.error().message, "piece plan: piece 1: names '" + kernel + "' twice"), r.error().message);
    // A global listed twice in one piece, too.
    e.plan.pieces[1].globals.back() = "twice";
    e.plan.pieces[1].globals.push_back("twice");
    r = write_package("plans", {e}, pack_options{});
    REQUIRE_FALSE(r);
    CHECK_MESSAGE(contains(r.error().message, "names 'twice' twice"), r.error().message);
  }
  SUBCASE("plan_offset set while plan_size is 0") {
    entry_input sass = make_entry("vadd.sm_80.cubin", {entry_kind::sass, 80, arch_variant::plain});
    entry_input p = varied_ptx();
    p.plan = make_piece_plan(byte_span(p.raw), p.kernels, "v");
    auto two = write_package("two", {sass, p}, pack_options{});
    REQUIRE(two);
    auto bad = *two;
    const std::uint64_t e0 = get32(&bad[h_header_size]);
    REQUIRE(get32(&bad[e0 + e_plan_size]) == 0);
    REQUIRE(get32(&bad[e0 + e_plan_offset]) == 0);
    put32(&bad[e0 + e_plan_offset], 1);
    reseal(bad);
    const error err = parse_error(bad);
    CHECK(err.reason == errc::malformed);
    CHECK_MESSAGE(contains(err.message, "entry 0 (sm_80, module 'vadd'): plan_offset is 1 but plan_size is 0"), err.message);
  }
}

TEST_CASE("verify rebuilds every piece of a plan: PTX edited with its checksums updated but its plan kept is refused") {
  entry_input e = varied_ptx();
  const auto good = plan_package(e);
  {
    auto pv = package_view::parse(byte_span(good), "plans.fpk");
    REQUIRE(pv);
    CHECK(verify_package_images(*pv));
  }
  // One byte of piece 3's last range changed; the writer computes the new checksums, the plan stays.
  const auto& range = e.plan.pieces.at(3).ranges.back();
  REQUIRE(range.second > range.first + 2);
  std::uint8_t& byte = e.raw.at(std::size_t(range.second - 2));
  byte = byte == ' ' ? '\t' : ' ';
  auto edited = write_package("plans", {e}, pack_options{});
  REQUIRE(edited);
  auto pv = package_view::parse(byte_span(*edited), "edited.fpk");
  REQUIRE_MESSAGE(pv, (pv ? "" : pv.error().message));
  CHECK(pv->verify());  // every checksum holds
  auto st = verify_package_images(*pv);
  REQUIRE_FALSE(st);
  CHECK(st.error().reason == errc::checksum);
  CHECK_MESSAGE(contains(st.error().message, "edited.fpk: package 'plans': entry 0 (compute_80, module 'varied'): piece plan: "
                                             "piece 3 (of 12) does not match the entry's PTX"),
                st.error().message);
}
