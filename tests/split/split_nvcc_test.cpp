// The PTX splitter on real nvcc output (tests/split/CMakeLists.txt builds it): varied.cu (templates,
// printf, assert, device malloc, globals and __constant__ shared and alone, function pointers,
// virtual functions, extern shared, textures, surfaces), with -lineinfo, and the repository's own
// kernels (tests/kernels: vadd, regs, typed, names; rdc_kernel's -rdc PTX is refused). Every piece must compile with ptxas, and the kernels of the pieces' cubins (read with
// core's cubin parser) must be exactly those of the whole module's cubin, each in one piece.
#include "fatpack/core/input.hpp"
#include "fatpack/core/ptx_split.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <unistd.h>

namespace {

using fatpack::core::byte_span;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A scratch directory of this process, removed at the end.
struct scratch_dir {
  std::string path;
  scratch_dir() {
    char tmpl[] = "/tmp/fatpack_split_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~scratch_dir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
};

// ptxas on `ptx` for its own .target; the kernels of the cubin it writes, sorted.
std::vector<std::string> compiled_kernels(const std::string& ptx, const std::string& name, const scratch_dir& dir) {
  auto info = fatpack::core::parse_ptx(byte_span(ptx), name);
  REQUIRE_MESSAGE(info.has_value(), name);
  const std::string sm = "sm_" + std::to_string(info->target.arch);
  const std::string in = dir.path + "/" + name + ".ptx", out = dir.path + "/" + name + ".cubin",
                    log = dir.path + "/" + name + ".log";
  std::ofstream(in, std::ios::binary) << ptx;
  const std::string cmd = std::string(FATPACK_PTXAS) + " -arch=" + sm + " -o '" + out + "' '" + in + "' > '" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO("ptxas log: " << read_text(log));
  REQUIRE_MESSAGE(rc == 0, "ptxas failed on " << name);
  const std::string cubin = read_text(out);
  auto parsed = fatpack::core::parse_cubin(byte_span(cubin), out);
  REQUIRE_MESSAGE(parsed.has_value(), out);
  std::vector<std::string> kernels = parsed->kernels;
  std::sort(kernels.begin(), kernels.end());
  return kernels;
}

fatpack::core::ptx_split_result split_file(const std::string& path, fatpack::core::ptx_split_options o = {}) {
  const std::string text = read_text(path);
  auto r = fatpack::core::split_ptx(byte_span(text), path, o);
  REQUIRE_MESSAGE(r.has_value(), (r ? std::string() : r.error().message));
  return std::move(r).value();
}

// Splits, compiles the whole and every piece, compares the kernels; returns the split.
fatpack::core::ptx_split_result check_pieces_compile(const std::string& path, const std::string& name,
                                                     fatpack::core::ptx_split_options o = {}) {
  CAPTURE(path);
  scratch_dir dir;
  auto r = split_file(path, o);
  const std::vector<std::string> whole = compiled_kernels(read_text(path), name + ".whole", dir);
  std::vector<std::string> from_pieces;
  for (std::size_t i = 0; i < r.pieces.size(); ++i) {
    auto k = compiled_kernels(r.pieces[i].text, name + ".piece" + std::to_string(i), dir);
    auto listed = r.pieces[i].kernels;
    std::sort(listed.begin(), listed.end());
    CHECK(k == listed);  // the piece holds the kernels the split says
    from_pieces.insert(from_pieces.end(), k.begin(), k.end());
  }
  std::sort(from_pieces.begin(), from_pieces.end());
  CHECK(from_pieces == whole);  // each kernel once
  return r;
}

const std::string split_dir = std::string(FATPACK_TEST_ARTIFACTS) + "/split/";

}  // namespace

TEST_CASE("real nvcc output: varied.cu, split per kernel, every piece compiles with ptxas") {
  auto r = check_pieces_compile(split_dir + "varied.plain.sm_80.ptx", "varied");
  CHECK(r.unsplit_reason.empty());
  std::map<std::string, std::size_t> piece;
  for (std::size_t i = 0; i < r.pieces.size(); ++i)
    for (const auto& k : r.pieces[i].kernels) piece[k] = i;
  REQUIRE(piece.size() == 16);
  // A __device__ variable and a __constant__ shared by count_a and count_b.
  CHECK(piece["_Z7count_aPi"] == piece["_Z7count_bPi"]);
  CHECK(piece["_Z5alonePi"] != piece["_Z7count_aPi"]);
  // Function pointers (direct and through a table) and the vtable with its indirect call.
  CHECK(piece["_Z9via_tablePfi"] == piece["_Z11via_pointerPfi"]);
  CHECK(piece["_Z11make_squarePP5Shapef"] == piece["_Z9call_areaPKP5ShapePf"]);
  CHECK(piece["_Z11make_squarePP5Shapef"] == piece["_Z9via_tablePfi"]);
  // Extern shared memory does not group; templates, printf, assert are alone.
  CHECK(piece["_Z5ext_aPf"] != piece["_Z5ext_bPf"]);
  CHECK(piece["_Z5scaleIfEvPT_S0_"] != piece["_Z5scaleIdEvPT_S0_"]);
  CHECK(r.pieces[piece["_Z4saysi"]].kernels.size() == 1);
  CHECK(r.pieces[piece["_Z6checksPKi"]].kernels.size() == 1);
  CHECK(r.pieces.size() == 12);
}

TEST_CASE("real nvcc output: -lineinfo, and balanced groups") {
  auto r = check_pieces_compile(split_dir + "varied.lineinfo.sm_80.ptx", "varied_lineinfo");
  CHECK(r.unsplit_reason.empty());
  CHECK(r.pieces.size() == 12);
  fatpack::core::ptx_split_options o;
  o.mode = fatpack::core::ptx_split_options::granularity::groups;
  o.groups = 3;
  auto g = check_pieces_compile(split_dir + "varied.plain.sm_80.ptx", "varied_groups", o);
  CHECK(g.pieces.size() == 3);
}

TEST_CASE("real nvcc output: -rdc and -G come back whole, with the reason") {
  auto rdc = split_file(split_dir + "varied.rdc.sm_80.ptx");
  CHECK(rdc.pieces.size() == 1);
  CHECK(rdc.unsplit_reason.find("-rdc") != std::string::npos);
  auto g = split_file(split_dir + "varied.G.sm_80.ptx");
  CHECK(g.pieces.size() == 1);
  CHECK(g.unsplit_reason.find("-G") != std::string::npos);
}

TEST_CASE("real nvcc output: the repository's own kernels") {
  const std::string a = FATPACK_TEST_ARTIFACTS;
  for (const char* f : {"/vadd.compute_80.ptx", "/regs.compute_80.ptx", "/typed.compute_80.ptx", "/names.compute_90.ptx"}) {
    auto r = check_pieces_compile(a + f, std::string(f + 1));
    CHECK(r.unsplit_reason.empty());
  }
  // names.cu has 13 kernels and no shared state: one piece each.
  CHECK(split_file(a + "/names.compute_90.ptx").pieces.size() >= 10);
  // -rdc: a kernel calling a device function of another file.
  auto rdc = split_file(a + "/rdc_kernel.compute_90.rdc.ptx");
  CHECK(rdc.pieces.size() == 1);
  CHECK(rdc.unsplit_reason.find("-rdc") != std::string::npos);
}
