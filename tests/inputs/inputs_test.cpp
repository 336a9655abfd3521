// Input detection and import (core/src/{cubin,ptx,fatbin_reader,input}.cpp) and the fatbin writer
// (fatbin_writer.cpp), on real nvcc 13.0 / fatbinary output (FATPACK_TEST_ARTIFACTS, built by
// tests/CMakeLists.txt and tests/inputs/CMakeLists.txt) and on the small malformed files in
// tests/data/inputs (tests/inputs/gen_malformed_inputs.cpp).
#include "fatpack/core/input.hpp"
#include "fatpack/core/package.hpp"

#include <doctest/doctest.h>

#include <lz4frame.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#if defined(__unix__)
#include <sys/mman.h>
#include <unistd.h>
#endif

using namespace fatpack::core;

namespace {

using bytes = std::vector<std::uint8_t>;

bytes read_path(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "missing test file " << path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
// Artifacts from tests/CMakeLists.txt ("vadd.sm_90.cubin") or from tests/inputs ("inputs/...").
bytes art(const std::string& name) { return read_path(std::string(FATPACK_TEST_ARTIFACTS) + "/" + name); }
bytes data(const std::string& name) { return read_path(std::string(FATPACK_TEST_DATA) + "/inputs/" + name); }
bytes text(const std::string& s) { return bytes(s.begin(), s.end()); }

target sass(std::uint32_t arch, arch_variant v = arch_variant::plain) { return {entry_kind::sass, arch, v}; }
target ptx(std::uint32_t arch, arch_variant v = arch_variant::plain) { return {entry_kind::ptx, arch, v}; }
constexpr arch_variant A = arch_variant::arch_specific;
constexpr arch_variant F = arch_variant::family;

std::set<std::string> as_set(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }
const std::set<std::string> vadd_kernels = {"vadd", "saxpy"};

std::uint32_t rd32(const bytes& b, std::size_t o) {
  return std::uint32_t(b[o]) | std::uint32_t(b[o + 1]) << 8 | std::uint32_t(b[o + 2]) << 16 | std::uint32_t(b[o + 3]) << 24;
}
std::uint64_t rd64(const bytes& b, std::size_t o) { return rd32(b, o) | std::uint64_t(rd32(b, o + 4)) << 32; }
void wr64(bytes& b, std::size_t o, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b[o + std::size_t(i)] = std::uint8_t(v >> (8 * i));
}

// Splits an uncompressed single-container fatbin into (header, payload) per entry.
struct raw_entry {
  bytes header, payload;
};
std::vector<raw_entry> split_fatbin(const bytes& fb) {
  std::vector<raw_entry> out;
  REQUIRE(fb.size() >= 16);
  const std::size_t end = 16 + std::size_t(rd64(fb, 8));
  REQUIRE(end == fb.size());
  std::size_t e = 16;
  while (e < end) {
    const std::size_t hs = rd32(fb, e + 4), pad = std::size_t(rd64(fb, e + 8));
    REQUIRE(e + hs + pad <= end);
    out.push_back({bytes(fb.begin() + long(e), fb.begin() + long(e + hs)),
                   bytes(fb.begin() + long(e + hs), fb.begin() + long(e + hs + pad))});
    e += hs + pad;
  }
  return out;
}

error import_error(const bytes& b, const std::string& source = "x.bin") {
  auto r = import_input(byte_span(b), source, "m");
  REQUIRE_FALSE(r.has_value());
  return r.error();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

// ---- detection ---------------------------------------------------------------------------------

TEST_CASE("detect_input recognises every kind from content") {
  CHECK(detect_input(byte_span(art("vadd.sm_90.cubin"))) == input_kind::cubin);
  CHECK(detect_input(byte_span(art("inputs/vadd.sm_100f.cubin"))) == input_kind::cubin);
  CHECK(detect_input(byte_span(art("vadd.compute_80.ptx"))) == input_kind::ptx);
  CHECK(detect_input(byte_span(art("inputs/devfuncs.compute_90.ptx"))) == input_kind::ptx);
  CHECK(detect_input(byte_span(art("vadd.fatbin"))) == input_kind::nvcc_fatbin);
  CHECK(detect_input(byte_span(art("vadd.compressed.fatbin"))) == input_kind::nvcc_fatbin);
  CHECK(detect_input(byte_span(art("inputs/vadd.lto.fatbin"))) == input_kind::ltoir);

  bytes pkg(package_magic, package_magic + 8);
  pkg.resize(200, 0);
  CHECK(detect_input(byte_span(pkg)) == input_kind::fatpack_package);
  CHECK(detect_input(byte_span()) == input_kind::unknown);
  CHECK(detect_input(byte_span(data("garbage.bin"))) == input_kind::unknown);
  CHECK(detect_input(byte_span(data("host_elf.o"))) == input_kind::unknown);   // x86-64 ELF
  CHECK(detect_input(byte_span(data("no_target.ptx"))) == input_kind::unknown);  // .version alone
  CHECK(detect_input(byte_span(bytes{0xED, 0x43, 0x4E, 0x7F, 1, 0x41, 2, 0x62})) == input_kind::ltoir);  // nvcc -ltoir
  CHECK(detect_input(byte_span(bytes{'B', 'C', 0xC0, 0xDE, 0x35, 0x14})) == input_kind::ltoir);          // LLVM bitcode
  CHECK(input_kind_name(input_kind::nvcc_fatbin) == std::string("nvcc fatbin"));

  SUBCASE("PTX after comments, blank lines, a BOM and with NUL padding") {
    CHECK(detect_input(byte_span(text("\xEF\xBB\xBF\n\n  // c\n/* block\n .entry x */\n\t.version 9.0\n.target sm_90\n"))) ==
          input_kind::ptx);
    bytes padded = art("vadd.compute_90.ptx");
    padded.resize(padded.size() + 7, 0);
    CHECK(detect_input(byte_span(padded)) == input_kind::ptx);
    CHECK(detect_input(byte_span(text("hello .version 9.0 .target sm_90"))) == input_kind::unknown);
    bytes inner_nul = text(".version 9.0\n.target sm_90\n");
    inner_nul.insert(inner_nul.begin() + 5, 0);
    CHECK(detect_input(byte_span(inner_nul)) == input_kind::unknown);
  }
}

// ---- cubins ------------------------------------------------------------------------------------

TEST_CASE("parse_cubin: SM, a/f variant, kernels and toolkit of real nvcc 13.0 cubins") {
  struct row {
    const char* file;
    target t;
  };
  const row rows[] = {
      {"vadd.sm_75.cubin", sass(75)},           {"vadd.sm_80.cubin", sass(80)},
      {"vadd.sm_86.cubin", sass(86)},           {"vadd.sm_89.cubin", sass(89)},
      {"vadd.sm_90.cubin", sass(90)},           {"vadd.sm_90a.cubin", sass(90, A)},
      {"inputs/vadd.sm_100.cubin", sass(100)},  {"inputs/vadd.sm_100a.cubin", sass(100, A)},
      {"inputs/vadd.sm_100f.cubin", sass(100, F)}, {"inputs/vadd.sm_120a.cubin", sass(120, A)},
      {"inputs/vadd.sm_120f.cubin", sass(120, F)},
  };
  for (const auto& r : rows) {
    CAPTURE(r.file);
    const bytes b = art(r.file);
    auto ci = parse_cubin(byte_span(b), r.file);
    REQUIRE_MESSAGE(ci.has_value(), (ci ? "" : ci.error().message));
    CHECK(ci->target == r.t);
    CHECK(ci->target.str() == std::string(r.file).substr(std::string(r.file).find("sm_"),
                                                         std::string(r.file).rfind('.') - std::string(r.file).find("sm_")));
    CHECK(as_set(ci->kernels) == vadd_kernels);
    CHECK(ci->kernels.size() == 2);
    CHECK(ci->toolkit_version == 13000);
    CHECK(ci->abi_version == 8);
    CHECK(ci->image_size == b.size());
    CHECK(ci->nv_compat.size() == (r.t.arch >= 90 ? 36u : 0u));  // sm_75..89 cubins have no .nv.compat
    // The header alone (what a cache hit checks after its checksum) gives the same SM.
    CHECK(cubin_header_sm(byte_span(b)) == r.t.arch);
    CHECK(cubin_header_sm(byte_span(b.data(), 64)) == r.t.arch);
    CHECK(cubin_header_sm(byte_span(b.data(), 63)) == 0);  // shorter than an ELF header
    bytes other = b;
    other[18] = 62;  // e_machine EM_X86_64: not a cubin
    CHECK(cubin_header_sm(byte_span(other)) == 0);
    other = b;
    other[4] = 1;  // ELFCLASS32
    CHECK(cubin_header_sm(byte_span(other)) == 0);
  }
}

TEST_CASE("parse_cubin: only entry functions are kernels") {
  SUBCASE("whole-program: device functions are local, a static kernel is local with STO_CUDA_ENTRY") {
    auto ci = parse_cubin(byte_span(art("inputs/devfuncs.sm_90.cubin")), "devfuncs.sm_90.cubin");
    REQUIRE(ci);
    CHECK(as_set(ci->kernels) ==
          std::set<std::string>{"_Z8kern_cppPf", "kern_c", "_Z11kern_staticPf", "_Z9kern_tmplIfEvPT_", "_Z9kern_tmplIiEvPT_"});
  }
  SUBCASE("-rdc: device functions are global symbols without STO_CUDA_ENTRY; template kernels are weak") {
    auto ci = parse_cubin(byte_span(art("inputs/devfuncs.rdc.sm_90.cubin")), "devfuncs.rdc.sm_90.cubin");
    REQUIRE(ci);
    const auto k = as_set(ci->kernels);
    CHECK(k.size() == 5);
    CHECK(k.count("kern_c") == 1);
    CHECK(k.count("_Z8kern_cppPf") == 1);
    CHECK(k.count("_Z9kern_tmplIfEvPT_") == 1);
    CHECK(k.count("chelper") == 0);
    CHECK(k.count("_Z6helperf") == 0);
    CHECK(std::count_if(k.begin(), k.end(), [](const std::string& s) {
            return s.size() > 17 && s.compare(s.size() - 17, 17, "_Z11kern_staticPf") == 0;
          }) == 1);  // renamed __nv_static_..._Z11kern_staticPf by -rdc
  }
}

TEST_CASE("parse_cubin rejects damaged ELF with errors naming source and field") {
  auto err = [](const bytes& b) {
    auto r = parse_cubin(byte_span(b), "bad.cubin");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message.rfind("bad.cubin: ", 0) == 0);
    return r.error();
  };
  CHECK(err(data("elf_header_truncated.cubin")).reason == errc::truncated);
  const error shdr = err(data("shdr_past_end.cubin"));
  CHECK(shdr.reason == errc::truncated);
  CHECK(contains(shdr.message, "section header table"));
  const error sec = err(data("section_past_end.cubin"));
  CHECK(sec.reason == errc::truncated);
  CHECK(contains(sec.message, "section 3"));
  const error sym = err(data("bad_symbol_name.cubin"));
  CHECK(sym.reason == errc::malformed);
  CHECK(contains(sym.message, "st_name"));
  CHECK(err(data("host_elf.o")).reason == errc::bad_magic);
  CHECK(err(text("not an elf")).reason == errc::bad_magic);
  CHECK(err(bytes{}).reason == errc::bad_magic);

  // The committed well-formed mini cubin parses (it is the base of the damaged ones).
  auto sm99 = parse_cubin(byte_span(data("sm_99.cubin")), "sm_99.cubin");
  REQUIRE(sm99);
  CHECK(sm99->target == sass(99));
  CHECK(sm99->kernels == std::vector<std::string>{"k"});

  SUBCASE("every truncation of a real cubin is an error, never a crash") {
    const bytes full = art("vadd.sm_90.cubin");
    for (std::size_t n = 0; n < full.size(); ++n) {
      auto r = parse_cubin(byte_span(full.data(), n), "cut");
      CHECK_FALSE(r.has_value());
    }
  }
  SUBCASE(".nv.compat as SHT_NOBITS has no bytes in the file: never read") {
    // Before: a section named .nv.compat was read whatever its type, and SHT_NOBITS sections skip
    // the range check (they occupy no file bytes), so its sh_offset/sh_size were read unchecked.
    bytes b = art("vadd.sm_90a.cubin");
    const std::uint64_t shoff = rd64(b, 40);
    const std::uint16_t shnum = std::uint16_t(b[60] | (b[61] << 8)), shstrndx = std::uint16_t(b[62] | (b[63] << 8));
    const std::uint64_t strtab = rd64(b, std::size_t(shoff + shstrndx * 64 + 24));
    bool patched = false;
    for (std::uint16_t i = 1; i < shnum; ++i) {
      const std::size_t sh = std::size_t(shoff + i * 64u);
      const std::uint32_t name = std::uint32_t(rd64(b, sh) & 0xffffffffu);
      if (std::strcmp(reinterpret_cast<const char*>(b.data() + strtab + name), ".nv.compat") != 0) continue;
      b[sh + 4] = 8;  // sh_type = SHT_NOBITS
      b[sh + 5] = b[sh + 6] = b[sh + 7] = 0;
      for (int k = 0; k < 8; ++k) b[sh + 24 + k] = k == 5 ? 0x10 : 0;  // sh_offset = 1 TiB
      patched = true;
    }
    REQUIRE(patched);
    auto r = parse_cubin(byte_span(b), "nobits");
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
    CHECK(r->target.arch == 90);
  }
  SUBCASE("corrupting header and section table bytes never crashes") {
    const bytes full = art("inputs/vadd.sm_100f.cubin");
    const std::size_t shoff = std::size_t(rd64(full, 40));
    std::vector<std::size_t> spots;
    for (std::size_t i = 0; i < 64; ++i) spots.push_back(i);
    for (std::size_t i = shoff; i < full.size(); i += 3) spots.push_back(i);
    for (std::size_t at : spots)
      for (std::uint8_t v : {std::uint8_t(0x00), std::uint8_t(0xff), std::uint8_t(0x7f)}) {
        bytes b = full;
        b[at] = v;
        auto r = parse_cubin(byte_span(b), "fuzz");
        if (!r) CHECK(r.error().message.rfind("fuzz: ", 0) == 0);
      }
  }
}

// ---- PTX ---------------------------------------------------------------------------------------

TEST_CASE("import_input strips a UTF-8 byte order mark from PTX (ptxas refuses it)") {
  const bytes plain = art("vadd.compute_90.ptx");
  bytes with_bom = text("\xEF\xBB\xBF");
  with_bom.insert(with_bom.end(), plain.begin(), plain.end());
  auto imported = import_input(byte_span(with_bom), "bom.ptx", "vadd");
  REQUIRE_MESSAGE(imported, imported.error().message);
  REQUIRE(imported->size() == 1);
  const auto& e = imported->front();
  CHECK(e.target == ptx(90));
  // Exactly the text without the mark: what nvcc itself writes, and what ptxas accepts.
  CHECK(e.raw == plain);
  // Only a leading mark is removed; one inside the text stays an error for the lexer to report.
  auto twice = with_bom;
  twice.insert(twice.begin(), with_bom.begin(), with_bom.begin() + 3);
  CHECK_FALSE(import_input(byte_span(twice), "bom2.ptx", "vadd"));
}

TEST_CASE("parse_ptx: ISA, target and kernels of real nvcc output") {
  struct row {
    const char* file;
    target t;
  };
  const row rows[] = {{"vadd.compute_80.ptx", ptx(80)},
                      {"vadd.compute_90.ptx", ptx(90)},
                      {"inputs/vadd.compute_90a.ptx", ptx(90, A)},
                      {"inputs/vadd.compute_120f.ptx", ptx(120, F)}};
  for (const auto& r : rows) {
    CAPTURE(r.file);
    auto pi = parse_ptx(byte_span(art(r.file)), r.file);
    REQUIRE_MESSAGE(pi.has_value(), (pi ? "" : pi.error().message));
    CHECK(pi->target == r.t);
    CHECK(pi->isa == ptx_isa{9, 0});
    CHECK(pi->kernels == std::vector<std::string>{"vadd", "saxpy"});  // order of appearance
    CHECK(pi->toolkit_version == 13000);
  }
  CHECK(ptx(120, F).str() == "compute_120f");

  auto dev = parse_ptx(byte_span(art("inputs/devfuncs.compute_90.ptx")), "devfuncs.ptx");
  REQUIRE(dev);
  CHECK(as_set(dev->kernels) ==
        std::set<std::string>{"_Z8kern_cppPf", "kern_c", "_Z11kern_staticPf", "_Z9kern_tmplIfEvPT_", "_Z9kern_tmplIiEvPT_"});
}

TEST_CASE("parse_ptx: kernel parameters, laid out as cuLaunchKernel reads them") {
  auto offsets = [](const std::optional<std::vector<ptx_param>>& ps) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> out;
    if (ps)
      for (const auto& p : *ps) out.emplace_back(p.offset, p.size);
    return out;
  };
  using layout = std::vector<std::pair<std::uint32_t, std::uint32_t>>;
  // typed.cu: mix(const float*, char, double, int, float*), affine(const float*, float*), by nvcc.
  auto pi = parse_ptx(byte_span(art("typed.compute_80.ptx")), "typed.ptx");
  REQUIRE_MESSAGE(pi.has_value(), (pi ? "" : pi.error().message));
  REQUIRE(pi->kernels == std::vector<std::string>{"affine", "mix"});
  REQUIRE(pi->params.size() == 2);
  CHECK(offsets(pi->params[0]) == layout{{0, 8}, {8, 8}});
  CHECK(offsets(pi->params[1]) == layout{{0, 8}, {8, 1}, {16, 8}, {24, 4}, {32, 8}});

  const std::string src =
      ".version 9.0\n.target sm_90\n"
      ".entry s(.param .u8 c, .param .align 4 .b8 v[12], .param .u64 .ptr .global .align 16 p)\n{ ret; }\n"
      ".entry none()\n{ ret; }\n"
      ".entry odd(.param .u8 c, .param .weird w)\n{ ret; }\n"
      ".entry bare\n{ ret; }\n";
  auto t = parse_ptx(byte_span(text(src)), "t.ptx");
  REQUIRE_MESSAGE(t.has_value(), (t ? "" : t.error().message));
  REQUIRE(t->params.size() == 4);
  // The struct is 4-aligned after the char; the pointer's .align is its pointee's, so it sits at 16.
  CHECK(offsets(t->params[0]) == layout{{0, 1}, {4, 12}, {16, 8}});
  CHECK((t->params[1] && t->params[1]->empty()));
  CHECK_FALSE(t->params[2].has_value());  // a type this reader does not know: unknown, not an error
  CHECK_FALSE(t->params[3].has_value());  // no list at all
}

TEST_CASE("parse_ptx is not fooled by comments, strings and layout") {
  const std::string src =
      "// .version 1.0 in a comment\n"
      "/* .target sm_20\n   .entry commented_out( */\n"
      "\t.version\t8.7 // trailing\n"
      ".target sm_90a, texmode_independent\n"
      ".address_size 64\n"
      ".file 1 \"/tmp/a//b.cu\"\n"
      ".visible .entry first(\n .param .u64 p\n)\n{ ret; }\n"
      ".entry\n   second\n(\n)\n{ ret; }\n"
      ".visible .func helper()\n{ ret; }\n"
      ".entry third(){ret;}\n"
      ".entry first(){ret;}\n";  // a duplicate is listed once
  auto pi = parse_ptx(byte_span(text(src)), "t.ptx");
  REQUIRE_MESSAGE(pi.has_value(), (pi ? "" : pi.error().message));
  CHECK(pi->isa == ptx_isa{8, 7});
  CHECK(pi->target == ptx(90, A));
  CHECK(pi->kernels == std::vector<std::string>{"first", "second", "third"});
  CHECK(pi->toolkit_version == 0);

  auto list_first = parse_ptx(byte_span(text(".version 9.0\n.target texmode_independent, sm_100f\n")), "t");
  REQUIRE(list_first);
  CHECK(list_first->target == ptx(100, F));

  auto err = [](const std::string& s) {
    auto r = parse_ptx(byte_span(text(s)), "p.ptx");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message.rfind("p.ptx: ", 0) == 0);
    return r.error();
  };
  CHECK(contains(err(".target sm_90\n").message, ".version"));
  CHECK(contains(err(".version 9.0\n").message, ".target"));
  CHECK(contains(err(".version 9.0\n.target compute_90\n").message, ".target"));
  CHECK(contains(err(".version 9.0\n.target sm_9z\n").message, "sm_9z"));
  CHECK(contains(err(".version 9.0\n.target sm_90\n.entry (\n").message, ".entry"));
  CHECK(err("").reason == errc::malformed);
  CHECK(contains(err(std::string(".version 9.0\n.target sm_90\0x", 28)).message, "NUL"));
  CHECK(contains(err(std::string(".version 9.0\n.target sm_90\n\"open")).message, "string"));

  for (const char* f : {"no_target.ptx", "bad_version.ptx", "unterminated_comment.ptx"}) {
    CAPTURE(f);
    auto r = parse_ptx(byte_span(data(f)), f);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().reason == errc::malformed);
  }
  CHECK(contains(parse_ptx(byte_span(data("bad_version.ptx")), "b").error().message, "line 1"));
}

// ---- nvcc fatbins ------------------------------------------------------------------------------

TEST_CASE("import_fatbin: nvcc's fatbin gives the separately compiled cubins, byte for byte") {
  auto r = import_fatbin(byte_span(art("vadd.fatbin")), "vadd.fatbin");
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  const auto& es = r.value();
  REQUIRE(es.size() == 4);
  // nvcc's order: sm_75, sm_80, compute_90, sm_90.
  CHECK(es[0].target == sass(75));
  CHECK(es[1].target == sass(80));
  CHECK(es[2].target == ptx(90));
  CHECK(es[3].target == sass(90));
  CHECK(es[0].raw == art("vadd.sm_75.cubin"));
  CHECK(es[1].raw == art("vadd.sm_80.cubin"));
  CHECK(es[3].raw == art("vadd.sm_90.cubin"));
  for (const auto& e : es) {
    CAPTURE(e.origin);
    CHECK(as_set(e.kernels) == vadd_kernels);
    CHECK(e.module_name.empty());  // import_input sets it
    if (e.target.kind == entry_kind::sass) {
      CHECK(e.toolkit_version == 13000);
      CHECK_FALSE(e.ptx_isa.known());
    }
  }
  CHECK(es[0].origin == "vadd.fatbin: fatbin entry 0 (sm_75 sass)");
  CHECK(es[2].origin == "vadd.fatbin: fatbin entry 2 (compute_90 ptx)");

  // The PTX entry: fatbinary blanks comments and indentation, so it is not nvcc -ptx's text, but
  // ISA, target and kernels agree; no NUL terminator or padding is kept.
  const bytes separate = art("vadd.compute_90.ptx");
  auto sep = parse_ptx(byte_span(separate), "sep");
  REQUIRE(sep);
  CHECK(es[2].ptx_isa == sep->isa);
  CHECK(es[2].kernels == sep->kernels);
  CHECK(es[2].raw != separate);
  CHECK(es[2].raw.back() != 0);
  CHECK(std::find(es[2].raw.begin(), es[2].raw.end(), std::uint8_t(0)) == es[2].raw.end());
  CHECK(es[2].toolkit_version == 0);  // the comment with the release was stripped
  CHECK(es[2].options.empty());
}

TEST_CASE("import_fatbin: ZSTD, LZ4 block and LZ4 frame entries decompress to the same images") {
  auto plain = import_fatbin(byte_span(art("vadd.fatbin")), "vadd.fatbin");
  REQUIRE(plain);
  auto same_as_plain = [&](const std::vector<entry_input>& es, const std::vector<std::size_t>& which) {
    REQUIRE(es.size() == which.size());
    for (std::size_t i = 0; i < es.size(); ++i) {
      CAPTURE(es[i].origin);
      const entry_input& p = plain.value()[which[i]];
      CHECK(es[i].target == p.target);
      CHECK(es[i].raw == p.raw);
      CHECK(es[i].kernels == p.kernels);
      CHECK(es[i].ptx_isa == p.ptx_isa);
    }
  };
  SUBCASE("ZSTD (-Xfatbin -compress-all)") {
    auto r = import_fatbin(byte_span(art("vadd.compressed.fatbin")), "vadd.compressed.fatbin");
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
    same_as_plain(r.value(), {0, 1, 2, 3});
  }
  SUBCASE("LZ4 block (-compress-mode=speed)") {
    const bytes fb = art("inputs/vadd.lz4.fatbin");
    CHECK((rd64(fb, 16 + 0x28) & 0xF000) == 0x2000);
    auto r = import_fatbin(byte_span(fb), "vadd.lz4.fatbin");
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
    same_as_plain(r.value(), {0, 1, 2, 3});
  }
  SUBCASE("LZ4 frame (--compress-algorithm=3)") {
    const bytes fb = art("inputs/vadd.lz4frame.fatbin");
    CHECK((rd64(fb, 16 + 0x28) & 0xF000) == 0x4000);
    auto r = import_fatbin(byte_span(fb), "vadd.lz4frame.fatbin");
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
    same_as_plain(r.value(), {3, 2});
  }
  SUBCASE("zlib (--compress-algorithm=1) is refused, naming the entry and the flag") {
    const bytes fb = art("inputs/vadd.zlib.fatbin");
    auto r = import_fatbin(byte_span(fb), "vadd.zlib.fatbin");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().reason == errc::unsupported);
    CHECK(contains(r.error().message, "vadd.zlib.fatbin: entry 0 (sm_90 sass)"));
    CHECK(contains(r.error().message, "zlib (flag 0x1000"));
  }
}

TEST_CASE("import_fatbin: a/f flags, options and names in entry headers") {
  SUBCASE("variants") {
    auto r = import_fatbin(byte_span(art("inputs/vadd.variants.fatbin")), "v.fatbin");
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
    const auto& es = r.value();
    REQUIRE(es.size() == 6);
    CHECK(es[0].target == sass(90, A));
    CHECK(es[1].target == sass(100, A));
    CHECK(es[2].target == sass(100, F));
    CHECK(es[3].target == sass(120, F));
    CHECK(es[4].target == ptx(90, A));
    CHECK(es[5].target == ptx(120, F));
    CHECK(es[0].raw == art("vadd.sm_90a.cubin"));
    CHECK(es[1].raw == art("inputs/vadd.sm_100a.cubin"));
    CHECK(es[2].raw == art("inputs/vadd.sm_100f.cubin"));
    CHECK(es[3].raw == art("inputs/vadd.sm_120f.cubin"));
    for (const auto& e : es) {
      CHECK(as_set(e.kernels) == vadd_kernels);
      CHECK(e.options.empty());  // sm_100+ ELF descriptors hold .nv.compat, not options
    }
    CHECK(es[2].origin == "v.fatbin: fatbin entry 2 (sm_100f sass)");
  }
  SUBCASE("-lineinfo -Xptxas -O1: PTX options trimmed, name skipped") {
    auto r = import_fatbin(byte_span(art("inputs/vadd.options.fatbin")), "o.fatbin");
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
    const auto& es = r.value();
    REQUIRE(es.size() == 3);
    CHECK(es[0].target == ptx(90));
    CHECK(es[0].options == "-O1  --generate-line-info");
    CHECK(es[1].target == sass(90));
    CHECK(es[2].target == sass(100));
    CHECK(es[1].options.empty());
    CHECK(es[2].options.empty());
  }
  SUBCASE("LTO-IR entries are refused") {
    auto r = import_fatbin(byte_span(art("inputs/vadd.lto.fatbin")), "l.fatbin");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().reason == errc::unsupported);
    CHECK(contains(r.error().message, "l.fatbin: entry 0 (lto_90 ltoir)"));
  }
}

TEST_CASE("import_fatbin: containers back to back, and trailing zero padding") {
  const bytes a = art("vadd.fatbin"), b = art("vadd.compressed.fatbin");
  bytes both = a;
  both.insert(both.end(), b.begin(), b.end());
  both.resize(both.size() + 16, 0);
  auto r = import_fatbin(byte_span(both), "two");
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  REQUIRE(r->size() == 8);
  CHECK(r.value()[4].raw == r.value()[0].raw);
  CHECK(r.value()[7].origin == "two: fatbin entry 7 (sm_90 sass)");

  bytes junk = both;
  junk.back() = 1;  // not zero padding: a container that is not one
  auto j = import_fatbin(byte_span(junk), "junk");
  REQUIRE_FALSE(j.has_value());
  CHECK(j.error().reason == errc::malformed);
}

TEST_CASE("import_fatbin rejects damaged fatbins, all or nothing, never crashing") {
  auto err = [](const bytes& b, const char* name) {
    auto r = import_fatbin(byte_span(b), name);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message.rfind(std::string(name) + ": ", 0) == 0);
    return r.error();
  };
  const error past = err(data("entry_past_end.fatbin"), "e.fatbin");
  CHECK(past.reason == errc::truncated);
  CHECK(contains(past.message, "entry 0"));
  CHECK(contains(past.message, "payload size 0x10000"));
  CHECK(err(data("container_past_end.fatbin"), "c.fatbin").reason == errc::truncated);
  const error zstd = err(data("bad_zstd.fatbin"), "z.fatbin");
  CHECK(zstd.reason == errc::codec);
  CHECK(contains(zstd.message, "z.fatbin: entry 0 (sm_90 sass)"));
  CHECK(err(data("bad_lz4.fatbin"), "l.fatbin").reason == errc::codec);
  // 165 bytes whose ZSTD entry claims 4 GB (found by fuzz_input): refused before allocating.
  // Before: the reader allocated the 4 GB, then failed to decode.
  const error bomb = err(data("zstd_size_bomb.fatbin"), "b.fatbin");
  CHECK(bomb.reason == errc::malformed);
  CHECK(contains(bomb.message, "is impossible for"));
  const error zlib = err(data("zlib.fatbin"), "zl.fatbin");
  CHECK(zlib.reason == errc::unsupported);
  CHECK(contains(zlib.message, "0x1000"));
  CHECK(err(data("a_and_f.fatbin"), "af.fatbin").reason == errc::malformed);
  CHECK(err(bytes{0x50, 0xed, 0x55, 0xba}, "short").reason == errc::truncated);

  SUBCASE("header and payload sizes that disagree with the data") {
    bytes fb = art("vadd.compressed.fatbin");
    bytes wrong_usize = fb;
    wrong_usize[16 + 0x38] ^= 0x10;  // ZSTD frame declares another size
    CHECK(err(wrong_usize, "u").reason == errc::malformed);
    bytes wrong_arch = art("vadd.fatbin");
    wrong_arch[16 + 0x1C] = 80;  // sm_75 cubin labelled sm_80
    CHECK(contains(err(wrong_arch, "a").message, "e_flags say sm_75"));
    bytes plain_label = art("inputs/vadd.variants.fatbin");
    plain_label[16 + 0x28 + 2] &= 0xEF;  // sm_90a cubin without the `a` flag
    CHECK(contains(err(plain_label, "p").message, ".nv.compat"));
  }
  SUBCASE("every truncation of real fatbins is an error") {
    for (const char* f : {"vadd.fatbin", "vadd.compressed.fatbin", "inputs/vadd.lz4.fatbin"}) {
      const bytes full = art(f);
      for (std::size_t n = 0; n < full.size(); n += (n < 256 ? 1 : 13)) {
        auto r = import_fatbin(byte_span(full.data(), n), "cut");
        CHECK_FALSE(r.has_value());
      }
    }
  }
  SUBCASE("corrupted compressed payloads and headers never crash") {
    for (const char* f : {"vadd.compressed.fatbin", "inputs/vadd.lz4.fatbin", "inputs/vadd.lz4frame.fatbin"}) {
      const bytes full = art(f);
      for (std::size_t at = 0; at < full.size(); at += 5) {
        bytes b = full;
        b[at] ^= 0xA5;
        auto r = import_fatbin(byte_span(b), "fuzz");
        if (!r) CHECK(r.error().message.rfind("fuzz: ", 0) == 0);
      }
    }
  }
}

TEST_CASE("import_fatbin decodes an LZ4 frame that declares its content size") {
  // fatbinary's frames omit the size; other writers may include it. Rewrap the sm_90 cubin.
  const bytes cubin = art("vadd.sm_90.cubin");
  LZ4F_preferences_t prefs{};
  prefs.frameInfo.contentSize = cubin.size();
  bytes frame(LZ4F_compressFrameBound(cubin.size(), &prefs));
  const std::size_t n = LZ4F_compressFrame(frame.data(), frame.size(), cubin.data(), cubin.size(), &prefs);
  REQUIRE_FALSE(LZ4F_isError(n));
  frame.resize(n);
  bytes fb(16 + 64, 0);
  fb[0] = 0x50, fb[1] = 0xed, fb[2] = 0x55, fb[3] = 0xba, fb[4] = 1, fb[6] = 16;
  fb[16] = 2, fb[18] = 1, fb[19] = 1, fb[20] = 0x40, fb[16 + 0x18] = 8, fb[16 + 0x1A] = 1, fb[16 + 0x1C] = 90;
  wr64(fb, 16 + 0x08, (n + 7) / 8 * 8);
  fb[16 + 0x10] = std::uint8_t(n), fb[16 + 0x11] = std::uint8_t(n >> 8);
  wr64(fb, 16 + 0x28, 0x4011);
  wr64(fb, 16 + 0x38, cubin.size());
  fb.insert(fb.end(), frame.begin(), frame.end());
  fb.resize(16 + 64 + (n + 7) / 8 * 8, 0);
  wr64(fb, 8, fb.size() - 16);
  auto r = import_fatbin(byte_span(fb), "f");
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  CHECK(r.value()[0].raw == cubin);
  wr64(fb, 16 + 0x38, cubin.size() - 8);  // header says less than the frame holds
  CHECK(import_fatbin(byte_span(fb), "f").error().reason == errc::codec);
}

// ---- import_input ------------------------------------------------------------------------------

TEST_CASE("import_input dispatches on content and names the module") {
  SUBCASE("cubin") {
    const bytes b = art("vadd.sm_90a.cubin");
    auto r = import_input(byte_span(b), "k.cubin", "vadd");
    REQUIRE(r);
    REQUIRE(r->size() == 1);
    const entry_input& e = r->front();
    CHECK(e.target == sass(90, A));
    CHECK(e.module_name == "vadd");
    CHECK(e.raw == b);
    CHECK(e.origin == "k.cubin");
    CHECK(e.toolkit_version == 13000);
    CHECK(as_set(e.kernels) == vadd_kernels);
  }
  SUBCASE("PTX: stored without NUL padding") {
    bytes b = art("vadd.compute_80.ptx");
    const bytes original = b;
    b.resize(b.size() + 5, 0);
    auto r = import_input(byte_span(b), "k.ptx", "vadd");
    REQUIRE(r);
    REQUIRE(r->size() == 1);
    CHECK(r->front().target == ptx(80));
    CHECK(r->front().ptx_isa == ptx_isa{9, 0});
    CHECK(r->front().raw == original);
    CHECK(r->front().kernels == std::vector<std::string>{"vadd", "saxpy"});
  }
  SUBCASE("fatbin: all entries, one module") {
    auto r = import_input(byte_span(art("vadd.compressed.fatbin")), "k.fatbin", "mod");
    REQUIRE(r);
    CHECK(r->size() == 4);
    for (const auto& e : r.value()) CHECK(e.module_name == "mod");
  }
  SUBCASE("errors") {
    const error unknown = import_error(data("garbage.bin"), "x.bin");
    CHECK(unknown.reason == errc::unknown_kind);
    CHECK(unknown.message == "x.bin: not a cubin, PTX or nvcc fatbin (first bytes: 12 34 56 78 9a bc de f0 ..)");
    const error host = import_error(data("host_elf.o"), "host.o");
    CHECK(host.reason == errc::unknown_kind);
    CHECK(host.message == "host.o: not a cubin, PTX or nvcc fatbin (an ELF64 file for e_machine 62; cubins are ELF64 "
                          "for 190, EM_CUDA)");
    const error empty = import_error(bytes{}, "e.bin");
    CHECK(empty.reason == errc::unknown_kind);
    CHECK(contains(empty.message, "e.bin: empty"));
    bytes pkg(package_magic, package_magic + 8);
    pkg.resize(64, 0);
    const error package = import_error(pkg, "p.fpk");
    CHECK(package.reason == errc::unknown_kind);
    CHECK(contains(package.message, "p.fpk: "));
    CHECK(contains(package.message, "fatpack package"));
    const error sm99 = import_error(data("sm_99.cubin"), "sm_99.cubin");
    CHECK(sm99.reason == errc::unsupported);
    CHECK(sm99.message == "sm_99.cubin: cubin for sm_99, an architecture CUDA 13.0 does not know");
    // Borrowed bytes are refused the same way, unless the caller says the SASS is a driver's own
    // (fatpack::compile's JIT output for a GPU newer than this table, docs/nvrtc.md).
    const bytes sm99_bytes = data("sm_99.cubin");
    CHECK_FALSE(import_input(byte_span(sm99_bytes), "sm_99.cubin", "m", input_bytes::borrow));
    for (input_bytes how : {input_bytes::copy, input_bytes::borrow}) {
      auto own = import_input(byte_span(sm99_bytes), "sm_99.cubin", "m", how, /*unknown_sass_ok=*/true);
      REQUIRE(own);
      CHECK(own->size() == 1);
      CHECK(own->front().target.arch == 99);
    }
    CHECK(import_error(art("inputs/vadd.lto.fatbin"), "l").reason == errc::unsupported);
    CHECK(import_error(bytes{0xED, 0x43, 0x4E, 0x7F, 1, 2, 3, 4}, "l").reason == errc::unsupported);
    CHECK(import_error(data("shdr_past_end.cubin"), "s.cubin").reason == errc::truncated);
    CHECK(import_error(data("entry_past_end.fatbin"), "e.fatbin").reason == errc::truncated);
  }
}

// ---- write_fatbin ------------------------------------------------------------------------------

namespace {

entry_input load(const std::string& artifact) {
  auto r = import_input(byte_span(art(artifact)), artifact, "vadd");
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  REQUIRE(r->size() == 1);
  return std::move(r->front());
}

}  // namespace

TEST_CASE("write_fatbin writes what fatbinary -compress=false writes") {
  // Same images, same order as vadd.reference.fatbin (tests/inputs/CMakeLists.txt).
  const std::vector<entry_input> in = {load("vadd.sm_90.cubin"), load("vadd.sm_90a.cubin"),
                                       load("inputs/vadd.sm_100.cubin"), load("inputs/vadd.sm_100f.cubin"),
                                       load("vadd.compute_90.ptx")};
  auto ours = write_fatbin(in);
  REQUIRE_MESSAGE(ours.has_value(), (ours ? "" : ours.error().message));
  const bytes ref = art("inputs/vadd.reference.fatbin");
  CHECK(std::equal(ours->begin(), ours->begin() + 8, ref.begin()));  // magic, version, header size
  const auto a = split_fatbin(ours.value()), b = split_fatbin(ref);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < 4; ++i) {  // ELF entries: identical headers and payloads
    CAPTURE(i);
    CHECK(a[i].header == b[i].header);
    CHECK(a[i].payload == b[i].payload);
  }
  // PTX: fatbinary strips comments/indentation, we do not; everything but the sizes agrees.
  bytes ha = a[4].header, hb = b[4].header;
  REQUIRE(ha.size() == hb.size());
  wr64(ha, 0x08, 0);
  wr64(hb, 0x08, 0);
  CHECK(ha == hb);
  const bytes ptx_text = art("vadd.compute_90.ptx");
  REQUIRE(a[4].payload.size() == (ptx_text.size() + 1 + 7) / 8 * 8);
  CHECK(std::equal(ptx_text.begin(), ptx_text.end(), a[4].payload.begin()));
  CHECK(std::all_of(a[4].payload.begin() + long(ptx_text.size()), a[4].payload.end(), [](std::uint8_t c) { return c == 0; }));
}

TEST_CASE("write_fatbin -> import_fatbin round trip") {
  std::vector<entry_input> in = {load("vadd.sm_75.cubin"),          load("vadd.sm_90a.cubin"),
                                 load("inputs/vadd.sm_100f.cubin"), load("inputs/vadd.sm_120a.cubin"),
                                 load("vadd.compute_80.ptx"),       load("inputs/vadd.compute_120f.ptx")};
  in[4].options = "-O1 --generate-line-info";
  auto fb = write_fatbin(in);
  REQUIRE_MESSAGE(fb.has_value(), (fb ? "" : fb.error().message));
  CHECK(detect_input(byte_span(fb.value())) == input_kind::nvcc_fatbin);
  CHECK(fb->size() % 8 == 0);
  auto back = import_fatbin(byte_span(fb.value()), "out.fatbin");
  REQUIRE_MESSAGE(back.has_value(), (back ? "" : back.error().message));
  REQUIRE(back->size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    CAPTURE(in[i].origin);
    const entry_input& e = back.value()[i];
    CHECK(e.target == in[i].target);
    CHECK(e.raw == in[i].raw);
    CHECK(e.kernels == in[i].kernels);
    CHECK(e.ptx_isa == in[i].ptx_isa);
    CHECK(e.options == in[i].options);
  }
  // Deterministic, and the same whether or not the PTX carries a NUL already.
  in[5].raw.push_back(0);
  auto again = write_fatbin(in);
  REQUIRE(again);
  CHECK(again.value() == fb.value());
}

TEST_CASE("write_fatbin refuses what it cannot write faithfully") {
  auto err = [](std::vector<entry_input> in) {
    auto r = write_fatbin(in);
    REQUIRE_FALSE(r.has_value());
    return r.error();
  };
  CHECK(err({}).reason == errc::invalid_argument);
  entry_input lto = load("vadd.sm_90.cubin");
  lto.target = {entry_kind::ltoir, 90, arch_variant::plain};
  CHECK(err({lto}).reason == errc::invalid_argument);
  entry_input wrong_sm = load("vadd.sm_90.cubin");
  wrong_sm.target = sass(80);
  CHECK(contains(err({wrong_sm}).message, "entry 0 (sm_80 sass)"));
  entry_input lost_a = load("vadd.sm_90a.cubin");
  lost_a.target = sass(90);
  CHECK(contains(err({lost_a}).message, ".nv.compat"));
  entry_input wrong_ptx = load("vadd.compute_90.ptx");
  wrong_ptx.target = ptx(90, A);
  CHECK(contains(err({load("vadd.sm_90.cubin"), wrong_ptx}).message, "entry 1 (compute_90a ptx)"));
  entry_input wrong_isa = load("vadd.compute_90.ptx");
  wrong_isa.ptx_isa = {8, 8};
  CHECK(err({wrong_isa}).reason == errc::invalid_argument);
  entry_input garbage = load("vadd.sm_90.cubin");
  garbage.raw.resize(100);
  CHECK(err({garbage}).reason == errc::truncated);
}

// image_extent: the size of an image handed over without one (cuModuleLoadData's shape), from the
// image's own headers, read no further than the limit.
TEST_CASE("image_extent: real nvcc cubins, PTX and fatbins give their file size; damage and limits are errors") {
  for (const char* name : {"vadd.sm_75.cubin", "vadd.sm_90.cubin", "vadd.sm_90a.cubin", "vadd.fatbin",
                           "vadd.compressed.fatbin"}) {
    bytes b = art(name);
    auto n = image_extent(b.data(), b.size());
    REQUIRE_MESSAGE(n.has_value(), name << ": " << n.error().message);
    CHECK_MESSAGE(*n == b.size(), name);
    // Trailing bytes after the image (a larger buffer) do not count.
    bytes padded = b;
    padded.resize(b.size() + 4096, 0xAB);
    auto p = image_extent(padded.data(), padded.size());
    REQUIRE(p.has_value());
    CHECK(*p == b.size());
    // An image that says it is larger than the limit is refused, naming the limit.
    auto small = image_extent(b.data(), b.size() - 1);
    REQUIRE_FALSE(small.has_value());
    CHECK(small.error().message.find(std::to_string(b.size() - 1)) != std::string::npos);
  }
  bytes ptx = art("vadd.compute_80.ptx");
  bytes z = ptx;
  z.push_back(0);
  z.push_back('x');
  auto n = image_extent(z.data(), z.size());
  REQUIRE(n.has_value());
  CHECK(*n == ptx.size() + 1);  // through the NUL
  auto no_nul = image_extent(ptx.data(), ptx.size());
  REQUIRE_FALSE(no_nul.has_value());
  CHECK(no_nul.error().message.find("NUL") != std::string::npos);
  bytes junk = text("hello, world");
  junk.push_back(0);
  CHECK_FALSE(image_extent(junk.data(), junk.size()).has_value());
  // A cubin whose section header table is claimed to lie past the limit.
  bytes c = art("vadd.sm_90.cubin");
  const std::uint64_t far = std::uint64_t(1) << 40;
  std::memcpy(c.data() + 0x28, &far, 8);
  auto bad = image_extent(c.data(), c.size());
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message.find("section header table") != std::string::npos);
  CHECK_FALSE(image_extent(nullptr, 100).has_value());
}

#if defined(__unix__)
// An image shorter than a magic, right before unreadable memory: "" and "\x7f" (the first byte of the
// ELF magic) end at their NUL, and nothing after it is read (a 4-byte memcmp read into the guard page
// and crashed).
TEST_CASE("image_extent: a string shorter than a magic is read no further than its NUL") {
  const long page = ::sysconf(_SC_PAGESIZE);
  void* m = ::mmap(nullptr, std::size_t(2 * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  auto* guard = static_cast<std::uint8_t*>(m) + page;
  REQUIRE(::mprotect(guard, std::size_t(page), PROT_NONE) == 0);
  guard[-1] = 0;
  auto empty = image_extent(guard - 1, std::size_t(1) << 30);
  REQUIRE_FALSE(empty.has_value());
  CHECK(empty.error().reason == errc::unknown_kind);
  guard[-2] = 0x7f;
  auto del = image_extent(guard - 2, std::size_t(1) << 30);
  CHECK_FALSE(del.has_value());
  guard[-2] = 0x50;  // the fatbin magic's first byte
  CHECK_FALSE(image_extent(guard - 2, std::size_t(1) << 30).has_value());
  ::munmap(m, std::size_t(2 * page));
}
#endif

// Separate compilation (nvcc -rdc=true): a relocatable cubin is not loadable as it is. rdc_kernel.cu
// calls rdc_scale, defined in rdc_device.cu; rdc.sm_90.cubin is their nvcc -dlink -cubin output.
TEST_CASE("relocatable cubins: recognised, their unresolved symbols named, refused by import and verify") {
  const bytes kernel = art("rdc_kernel.sm_90.rdc.cubin"), device = art("rdc_device.sm_90.rdc.cubin"),
              linked = art("rdc.sm_90.cubin");
  auto k = parse_cubin(byte_span(kernel), "rdc_kernel.cubin");
  REQUIRE_MESSAGE(k, k.error().message);
  CHECK(k->relocatable);
  CHECK(k->unresolved == std::vector<std::string>{"_Z9rdc_scalef"});  // weak __UFT/__UDT tables are not listed
  CHECK(k->kernels == std::vector<std::string>{"rdc_saxpy"});
  auto d = parse_cubin(byte_span(device), "rdc_device.cubin");
  REQUIRE(d);
  CHECK(d->relocatable);
  CHECK(d->unresolved.empty());
  CHECK(d->kernels.empty());  // a device function is not a kernel
  auto l = parse_cubin(byte_span(linked), "rdc.cubin");
  REQUIRE(l);
  CHECK_FALSE(l->relocatable);
  CHECK(l->unresolved.empty());
  CHECK(l->kernels == std::vector<std::string>{"rdc_saxpy"});
  CHECK(art("vadd.sm_90.cubin").size() > 0);
  CHECK_FALSE(parse_cubin(byte_span(art("vadd.sm_90.cubin")), "vadd")->relocatable);

  auto imported = import_input(byte_span(kernel), "rdc_kernel.sm_90.rdc.cubin", "rdc");
  REQUIRE_FALSE(imported);
  CHECK(imported.error().message.find("rdc_kernel.sm_90.rdc.cubin: relocatable cubin (sm_90") == 0);
  CHECK(imported.error().message.find("unresolved symbols: _Z9rdc_scalef") != std::string::npos);
  CHECK(imported.error().message.find("nvcc -dlink -cubin -arch=sm_90") != std::string::npos);
  auto dev = import_input(byte_span(device), "rdc_device.sm_90.rdc.cubin", "rdc");
  REQUIRE_FALSE(dev);  // nothing unresolved, still not linked
  CHECK(dev.error().message.find("relocatable cubin") != std::string::npos);
  CHECK(import_input(byte_span(linked), "rdc.sm_90.cubin", "rdc"));
  CHECK(refuse_relocatable_cubin(byte_span(linked), "x"));
  CHECK(refuse_relocatable_cubin(byte_span(text("not an ELF")), "x"));

  // A package that holds one anyway (the writer does not look inside images): checksums pass, and
  // verify_package_images (fatpack verify) refuses it naming the entry and the symbol.
  entry_input e;
  e.target = sass(90);
  e.module_name = "rdc";
  e.kernels = {"rdc_saxpy"};
  e.raw = kernel;
  e.origin = "rdc_kernel.sm_90.rdc.cubin";
  entry_input ok = e;
  ok.raw = linked;
  ok.target = sass(80);  // any other target: one entry per target
  auto pkg = write_package("rdcpkg", {ok, e}, pack_options{});
  REQUIRE(pkg);
  auto pv = package_view::parse(byte_span(*pkg), "rdc.fpk");
  REQUIRE(pv);
  CHECK(pv->verify());
  auto st = verify_package_images(*pv);
  REQUIRE_FALSE(st);
  CHECK(st.error().message.find("rdc.fpk: entry 1 (sm_90, module 'rdc'): relocatable cubin") == 0);
  CHECK(st.error().message.find("_Z9rdc_scalef") != std::string::npos);
}

TEST_CASE("import_input borrowing the bytes gives what the copying one gives, and the same package") {
  // add_image borrows its image while it packs it (one copy, into the package, instead of two): a
  // borrowed entry must describe the input as a copied one does, and pack to the same bytes.
  for (const char* name : {"vadd.sm_90a.cubin", "vadd.sm_90.cubin", "vadd.compute_80.ptx", "inputs/vadd.sm_100f.cubin"}) {
    INFO(name);
    const bytes b = art(name);
    auto copied = import_input(byte_span(b), name, "vadd");
    auto borrowed = import_input(byte_span(b), name, "vadd", input_bytes::borrow);
    REQUIRE(copied);
    REQUIRE(borrowed);
    REQUIRE(borrowed->size() == copied->size());
    const entry_input& m = borrowed->front();
    const entry_input& c = copied->front();
    CHECK(m.target == c.target);
    CHECK(m.ptx_isa == c.ptx_isa);
    CHECK(m.toolkit_version == c.toolkit_version);
    CHECK(m.kernels == c.kernels);
    CHECK(m.module_name == c.module_name);
    CHECK(m.origin == c.origin);
    CHECK(m.raw.empty());                                                  // nothing copied
    CHECK(m.borrowed.data >= b.data());                                    // a view of the caller's bytes
    CHECK(m.borrowed.data + m.borrowed.size <= b.data() + b.size());
    CHECK(bytes(m.bytes().begin(), m.bytes().end()) == c.raw);
    CHECK(m.plan.pieces.size() == c.plan.pieces.size());
    pack_options none;
    none.codec = codec::none;
    auto pm = write_package_lz4("p", *borrowed, none);
    auto pc = write_package_lz4("p", *copied, none);
    REQUIRE(pm);
    REQUIRE(pc);
    CHECK(*pm == *pc);
  }
}
