// The committed v1 golden files (tests/golden/v1/, written by gen_golden.cpp) read back exactly as
// their MANIFEST says with today's readers: a reader must keep reading what an older writer wrote
// (docs/format.md §8, docs/cache.md §3). A failure here means a reader change broke old files: fix
// the reader, never regenerate the files to make this pass.
#include "cache/entry.hpp"
#include "cache/index.hpp"
#include "cache/key.hpp"

#include "fatpack/core/codec.hpp"
#include "fatpack/core/package.hpp"
#include "fatpack/core/ptx_split.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace fatpack;
using bytes = std::vector<std::uint8_t>;

namespace {

const std::string dir = FATPACK_GOLDEN_DIR;
const std::string dir_v1_1 = FATPACK_GOLDEN_V1_1_DIR;
const std::string dir_v1_2 = FATPACK_GOLDEN_V1_2_DIR;

bytes read(const std::string& name, const std::string& folder = dir) {
  std::ifstream f(folder + "/" + name, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot read golden file " << name);
  return bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<std::vector<std::string>> manifest(const std::string& kind, const std::string& folder = dir) {
  std::ifstream f(folder + "/MANIFEST");
  REQUIRE(f.good());
  std::vector<std::vector<std::string>> out;
  std::string line;
  bool in_kind = false;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::vector<std::string> w;
    for (std::string s; ss >> s;) w.push_back(s);
    // "entry" lines belong to the "package" line above them, "slot" lines to "index".
    if (w[0] == "package" || w[0] == "cache_entry" || w[0] == "index") in_kind = (w[0] == kind);
    if (in_kind) out.push_back(w);
  }
  return out;
}

std::string hex64(std::uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string hex128(const std::array<std::uint8_t, 16>& h) {
  std::string s;
  for (auto b : h) {
    char x[3];
    std::snprintf(x, sizeof x, "%02x", b);
    s += x;
  }
  return s;
}

}  // namespace

TEST_CASE("golden v1 packages (codecs none, lz4, zstd) read back exactly") {
  const auto lines = manifest("package");
  REQUIRE(lines.size() >= 3 + 3);  // three packages with their entries
  std::map<std::string, std::vector<std::string>> raw_hashes;  // per codec, per entry
  int packages = 0;
  for (std::size_t i = 0; i < lines.size();) {
    REQUIRE(lines[i][0] == "package");
    const std::string file = lines[i][1], name = lines[i][2];
    const std::size_t n = std::stoul(lines[i][3]);
    const bytes b = read(file);
    CAPTURE(file);
    std::vector<core::package_view> views;
    REQUIRE(core::for_each_package(core::byte_span(b), file, [&](core::package_view&& pv) {
      views.push_back(std::move(pv));
      return core::status{};
    }));
    REQUIRE(views.size() == 1);
    const auto& pv = views[0];
    CHECK(pv.name() == name);
    CHECK(pv.version_major() == 1);
    CHECK(pv.version_minor() == 0);
    CHECK(pv.total_size() == b.size());
    CHECK(pv.verify());
    REQUIRE(pv.entries().size() == n);
    for (std::size_t k = 0; k < n; ++k) {
      const auto& w = lines[i + 1 + k];
      REQUIRE(w[0] == "entry");
      const auto& e = pv.entries()[k];
      CAPTURE(k);
      CHECK(e.target.str() == w[1]);
      if (w[2] != "-") CHECK(e.ptx_isa.str() == w[2]);
      CHECK(std::string(core::codec_name(e.codec)) == w[3]);
      CHECK(e.module_name == w[4]);
      CHECK(e.raw_size == std::stoull(w[5]));
      CHECK(hex64(e.raw_xxh3) == w[6]);
      std::string kernels;
      for (auto kn : e.kernels) kernels += (kernels.empty() ? "" : ",") + std::string(kn);
      CHECK((kernels.empty() ? "-" : kernels) == w[7]);
      auto raw = pv.decompress(k);
      REQUIRE(raw);
      CHECK(raw->size() == std::stoull(w[5]));
      CHECK(hex64(core::xxh3(core::byte_span(*raw))) == w[6]);  // the image itself, not the stored hash
      raw_hashes[w[3]].push_back(hex64(core::xxh3(core::byte_span(*raw))));
    }
    ++packages;
    i += 1 + n;
  }
  CHECK(packages == 3);
  // Every codec stores the same images.
  CHECK(raw_hashes["none"] == raw_hashes["lz4"]);
  CHECK(raw_hashes["none"] == raw_hashes["zstd"]);
}

TEST_CASE("golden v1.1 package with a link group reads back exactly") {
  const auto lines = manifest("package", dir_v1_1);
  REQUIRE(lines.size() == 3);
  REQUIRE(lines[0][0] == "package");
  const bytes b = read(lines[0][1], dir_v1_1);
  auto pv = core::package_view::parse(core::byte_span(b), lines[0][1]);
  REQUIRE_MESSAGE(pv, pv.error().message);
  CHECK(pv->name() == lines[0][2]);
  CHECK(pv->version_major() == 1);
  CHECK(pv->version_minor() == 1);
  CHECK(pv->verify());
  REQUIRE(pv->entries().size() == std::stoul(lines[0][3]));
  for (std::size_t k = 0; k < pv->entries().size(); ++k) {
    const auto& w = lines[1 + k];
    const auto& e = pv->entries()[k];
    CAPTURE(k);
    CHECK(e.target.str() == w[1]);
    CHECK(e.ptx_isa.str() == w[2]);
    CHECK(std::string(core::codec_name(e.codec)) == w[3]);
    CHECK(e.module_name == w[4]);
    CHECK(e.raw_size == std::stoull(w[5]));
    std::string kernels;
    for (auto kn : e.kernels) kernels += (kernels.empty() ? "" : ",") + std::string(kn);
    CHECK((kernels.empty() ? "-" : kernels) == w[7]);
    CHECK(std::to_string(e.link_part) + "/" + std::to_string(e.link_parts) == w[8]);
    CHECK(e.selectable() == (k == 0));
    auto raw = pv->decompress(k);
    REQUIRE(raw);
    CHECK(hex64(core::xxh3(core::byte_span(*raw))) == w[6]);
  }
}

TEST_CASE("golden v1.2 package with a piece plan reads back exactly, and its pieces rebuild") {
  // The "package" line, then its "piece" lines.
  const auto lines = manifest("package", dir_v1_2);
  REQUIRE(lines.size() >= 3);
  const auto& w = lines[0];
  REQUIRE(w[0] == "package");
  const std::vector<std::vector<std::string>> pieces(lines.begin() + 1, lines.end());
  const bytes b = read(w[1], dir_v1_2);
  auto pv = core::package_view::parse(core::byte_span(b), w[1]);
  REQUIRE_MESSAGE(pv, pv.error().message);
  CHECK(pv->name() == w[2]);
  CHECK(pv->version_major() == 1);
  CHECK(pv->version_minor() == 2);
  CHECK(pv->verify());
  REQUIRE(pv->entries().size() == 1);
  const auto& e = pv->entries()[0];
  CHECK(e.raw_size == std::stoull(w[3]));
  auto raw = pv->decompress(0);
  REQUIRE(raw);
  CHECK(hex64(core::xxh3(core::byte_span(*raw))) == w[4]);
  CHECK(e.plan.header_end == std::stoull(w[5]));
  REQUIRE(e.plan.pieces.size() == std::stoul(w[6]));
  REQUIRE(pieces.size() == e.plan.pieces.size());
  const std::string_view text(reinterpret_cast<const char*>(raw->data()), raw->size());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    CAPTURE(i);
    const auto& p = e.plan.pieces[i];
    CHECK(hex64(p.xxh3) == pieces[i][1]);
    CHECK(p.size == std::stoull(pieces[i][2]));
    CHECK(p.ranges.size() == std::stoul(pieces[i][3]));
    std::string kernels, globals;
    for (auto k : p.kernels) kernels += (kernels.empty() ? "" : ",") + std::string(e.kernels.at(k));
    for (const auto& g : p.globals) globals += (globals.empty() ? "" : ",") + g;
    CHECK(kernels == pieces[i][4]);
    CHECK((globals.empty() ? "-" : globals) == pieces[i][5]);
    const std::string made = core::assemble_ptx_piece(text, e.plan.header_end, p.ranges);
    CHECK(made.size() == p.size);
    CHECK(core::xxh3(core::byte_span(reinterpret_cast<const std::uint8_t*>(made.data()), made.size())) == p.xxh3);
  }
}

TEST_CASE("golden v1 cache entries decode to the cubin under their key") {
  using namespace detail::cache;
  const auto lines = manifest("cache_entry");
  REQUIRE(lines.size() >= 2);
  for (const auto& w : lines) {
    // cache_entry FILE ARCH CUBIN_SIZE CUBIN_XXH3 DRIVER_TEXT CODE_TEXT
    const std::string file = w[1];
    CAPTURE(file);
    const bytes b = read(file);
    std::array<std::uint8_t, 16> code_from_name{};
    std::uint64_t driver_from_name = 0;
    REQUIRE(parse_file_name(file, code_from_name, driver_from_name));
    entry_header h;
    const auto bad = parse_header(core::byte_span(b), b.size(), h);
    REQUIRE_MESSAGE(!bad, *bad);
    CHECK(h.major == 1);
    CHECK(h.code_hash == code_from_name);
    CHECK(h.driver_hash == driver_from_name);
    const auto bar = w[5].find('|');
    REQUIRE(bar != std::string::npos);
    const code_key code = code_key_of_text(w[6]);
    const driver_id drv = make_driver_id(std::stoi(w[5].substr(0, bar)), w[5].substr(bar + 1));
    CHECK(drv.text == w[5]);
    CHECK(code.hash == code_from_name);
    CHECK(drv.hash == driver_from_name);
    expected_key want;
    want.code = &code;
    want.driver = &drv;
    want.target_arch = static_cast<std::uint32_t>(std::stoul(w[2]));
    std::string driver_text, problem;
    auto cubin = decode_entry(core::byte_span(b), want, h, driver_text, problem);
    REQUIRE_MESSAGE(cubin.has_value(), problem);
    CHECK(driver_text == w[5]);
    CHECK(cubin->size() == std::stoull(w[3]));
    CHECK(hex64(core::xxh3(core::byte_span(*cubin))) == w[4]);
  }
}

TEST_CASE("golden v1 index maps with its slots") {
  using namespace detail::cache;
  const auto lines = manifest("index");
  REQUIRE(lines.size() >= 2);
  REQUIRE(lines[0][0] == "index");
  std::string why;
  auto idx = index_file::map(dir + "/" + lines[0][1], false, why);
  REQUIRE_MESSAGE(idx, why);
  CHECK(idx->capacity() == std::stoul(lines[0][2]));
  CHECK(idx->live() == std::stoull(lines[0][3]));
  CHECK(idx->damaged_slots() == 0);
  CHECK(!idx->retired());
  auto live = idx->live_slots();
  REQUIRE(live.size() == lines.size() - 1);
  std::uint64_t total = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto& w = lines[i];  // slot CODE DRIVER DISK_BYTES LAST_USE TICK
    auto it = std::find_if(live.begin(), live.end(), [&](const index_slot& s) { return hex128(s.code) == w[1]; });
    REQUIRE_MESSAGE(it != live.end(), "slot " << w[1] << " missing");
    CHECK(hex64(it->driver) == w[2]);
    CHECK(it->disk_bytes == std::stoul(w[3]));
    CHECK(it->last_use_s == std::stoul(w[4]));
    CHECK(it->tick == std::stoul(w[5]));
    index_slot found;
    CHECK(idx->find(it->code, it->driver, &found));
    CHECK(found.disk_bytes == it->disk_bytes);
    total += it->disk_bytes;
  }
  CHECK(idx->total_bytes() == total);
}
