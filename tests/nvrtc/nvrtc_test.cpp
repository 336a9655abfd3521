// fatpack::compile with the real NVRTC (the toolkit's libnvrtc.so.13) and the fake driver
// (tests/fakecuda), each compile in a fresh process (nvrtc_probe.cpp): miss then hit, a hit that does
// not load NVRTC, an edited header, name expressions, a compile error with NVRTC's log, a missing
// NVRTC, two devices, the PTX path; and the hostile-input bounds in process.
#include "test_support.hpp"

#include "fatpack/compile.hpp"
#include "fatpack/fatpack.h"
#include "jit/include_scan.hpp"
#include "jit/nvrtc.hpp"
#include "platform/build_id.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

using namespace fatpack_test;

namespace {

const char* const k_saxpy =
    "#include \"coef.h\"\n"
    "extern \"C\" __global__ void saxpy(float* y, const float* x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = COEF * x[i] + y[i];\n"
    "}\n";

const char* const k_template =
    "template <class T> __global__ void scale(T* x, T a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] *= a;\n"
    "}\n";

void write_text(const std::string& path, const std::string& text) {
  write_file(path, std::vector<std::uint8_t>(text.begin(), text.end()));
}

// A fresh directory per case (cache, sources).
std::string case_dir(const std::string& name) {
  std::string d = temp_dir() + "/" + name;
  ::mkdir(d.c_str(), 0700);
  return d;
}

std::map<std::string, std::string> env_for(const std::string& dir, const std::string& devices = "90") {
  return {{"FATPACK_LIBCUDA", FAKECUDA_PATH},
          {"FAKECUDA_DEVICES", devices},
          {"FATPACK_CACHE_PATH", dir + "/cache"},
          {"FATPACK_LIBNVRTC", NVRTC_PATH}};
}

child_result probe(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv{NVRTC_PROBE_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  child_result r = run_child(argv, env);
  INFO("probe stdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

}  // namespace

TEST_CASE("compile: a hit in a fresh process starts no thread, also where there are many cores") {
  // A 745 KB cubin: three 256 KiB LZ4 blocks in the cache entry, which a 16-core host used to decode
  // on the shared pool, starting its threads on every program's first hit (0.2 to 6 ms here).
  const std::string d = case_dir("hit_threads");
  std::string src = "#define K(n) extern \"C\" __global__ void k##n(float* y) { float a = y[threadIdx.x]; \\\n"
                    "  _Pragma(\"unroll\") for (int i = 0; i < 3000; ++i) a = a * 1.0001f + (i ^ n) * 0.5f; y[threadIdx.x] = a; }\n";
  for (int i = 0; i < 15; ++i) src += "K(" + std::to_string(i) + ")\n";
  write_text(d + "/big.cu", src);
  const std::vector<std::string> args{d + "/big.cu", "--kernel", "k14"};
  auto first = probe(args, env_for(d));
  REQUIRE(first.has("path=NVRTC SASS target=sm_90 stored=1"));
  auto env = env_for(d);
  env["LD_PRELOAD"] = NPROCS16_PATH;
  // Under ASan (the sanitizer job) the shim comes before ASan's runtime in the library list, which
  // ASan refuses by default; the order does not matter to what this case checks.
  if (const char* asan = std::getenv("ASAN_OPTIONS")) env["ASAN_OPTIONS"] = std::string(asan) + ":verify_asan_link_order=0";
  auto hit = probe(args, env);
  CHECK(hit.has("path=cache hit target=sm_90"));
  CHECK(hit.has("kernel=ok"));
  CHECK(hit.has(" hw=16"));  // the shim took: the runtime believes it has 16 cores
  CHECK(hit.has("threads=1 "));
  CHECK(hit.has("nvrtc_loaded=0"));
  // The entry is as large as the case needs: its cubin (the header's cubin_size, little-endian at
  // byte 56, docs/cache.md) spans at least two 256 KiB decode blocks.
  std::uint64_t cubin_size = 0;
  int entries = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(d + "/cache/v1/objects")) {
    if (e.path().extension() != ".fpc") continue;
    ++entries;
    std::ifstream f(e.path(), std::ios::binary);
    unsigned char b[64] = {};
    f.read(reinterpret_cast<char*>(b), sizeof b);
    for (int i = 7; i >= 0; --i) cubin_size = cubin_size << 8 | b[56 + i];
  }
  CHECK(entries == 1);
  CHECK(cubin_size >= 2 * (256u << 10));
}

TEST_CASE("compile: a miss compiles SASS with NVRTC, a second process hits without loading NVRTC") {
  const std::string d = case_dir("miss_hit");
  write_text(d + "/saxpy.cu", k_saxpy);
  ::mkdir((d + "/inc").c_str(), 0700);
  write_text(d + "/inc/coef.h", "#define COEF 2.0f\n");
  const std::vector<std::string> args{d + "/saxpy.cu", "--include", d + "/inc", "--kernel", "saxpy"};
  auto first = probe(args, env_for(d));
  INFO(first.out << first.err);
  CHECK(first.status == 0);
  CHECK(first.has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
  CHECK(first.has("nvrtc_loaded=1"));
  auto second = probe(args, env_for(d));
  INFO(second.out << second.err);
  CHECK(second.status == 0);
  CHECK(second.has("path=cache hit target=sm_90"));
  CHECK(second.has("kernel=ok"));
  CHECK(second.has("nvrtc_loaded=0"));

  // An edited header on the include path is a miss, then a hit again.
  {
    write_text(d + "/inc/coef.h", "#define COEF 3.0f\n");
    auto edited = probe(args, env_for(d));
    INFO(edited.out << edited.err);
    CHECK(edited.has("path=NVRTC SASS"));
    CHECK(edited.has("nvrtc_loaded=1"));
    auto again = probe(args, env_for(d));
    CHECK(again.has("path=cache hit"));
    CHECK(again.has("nvrtc_loaded=0"));
  }
  // FATPACK_CACHE_DISABLE: compiled, not stored, and the report says why.
  {
    auto env = env_for(d);
    env["FATPACK_CACHE_DISABLE"] = "1";
    auto off = probe(args, env);
    INFO(off.out << off.err);
    CHECK(off.has("path=NVRTC SASS target=sm_90 stored=0"));
    CHECK(off.has("not_cached=the cache is disabled (FATPACK_CACHE_DISABLE)"));
  }
  // FATPACK_CACHE_READONLY: a hit is still served; a miss compiles and says it was not stored.
  {
    auto env = env_for(d);
    env["FATPACK_CACHE_READONLY"] = "1";
    auto ro_hit = probe(args, env);
    CHECK(ro_hit.has("path=cache hit"));
    auto ro_miss = probe({d + "/saxpy.cu", "--include", d + "/inc", "--option", "-DREAD_ONLY=1"}, env);
    INFO(ro_miss.out << ro_miss.err);
    CHECK(ro_miss.has("path=NVRTC SASS target=sm_90 stored=0"));
    CHECK(ro_miss.has("not_cached=the cache is read-only"));
  }
  // Another option is a miss.
  {
    auto other = probe({d + "/saxpy.cu", "--include", d + "/inc", "--option", "-DUNUSED=1"}, env_for(d));
    INFO(other.out << other.err);
    CHECK(other.has("path=NVRTC SASS"));
  }
}

TEST_CASE("compile: headers given as contents are in the key") {
  const std::string d = case_dir("given_header");
  write_text(d + "/saxpy.cu", k_saxpy);
  write_text(d + "/a.h", "#define COEF 2.0f\n");
  write_text(d + "/b.h", "#define COEF 4.0f\n");
  auto a = probe({d + "/saxpy.cu", "--header", "coef.h=" + d + "/a.h"}, env_for(d));
  INFO(a.out << a.err);
  CHECK(a.has("path=NVRTC SASS"));
  CHECK(a.has("deps=0"));
  auto b = probe({d + "/saxpy.cu", "--header", "coef.h=" + d + "/b.h"}, env_for(d));
  CHECK(b.has("path=NVRTC SASS"));
  auto a2 = probe({d + "/saxpy.cu", "--header", "coef.h=" + d + "/a.h"}, env_for(d));
  CHECK(a2.has("path=cache hit"));
}

TEST_CASE("compile: name expressions find template instantiations, on a miss and on a hit") {
  const std::string d = case_dir("names");
  write_text(d + "/scale.cu", k_template);
  const std::vector<std::string> args{d + "/scale.cu", "--name-expr", "scale<float>", "--name-expr", "scale<int>",
                                      "--kernel", "scale<float>", "--kernel", "scale<int>"};
  auto miss = probe(args, env_for(d));
  INFO(miss.out << miss.err);
  CHECK(miss.status == 0);
  CHECK(miss.has("path=NVRTC SASS"));
  auto hit = probe(args, env_for(d));
  INFO(hit.out << hit.err);
  CHECK(hit.status == 0);
  CHECK(hit.has("path=cache hit"));
  CHECK(hit.has("nvrtc_loaded=0"));
  // Without the name expression nothing is instantiated: no kernel, and another key.
  auto none = probe({d + "/scale.cu", "--kernel", "scale<float>"}, env_for(d));
  CHECK(none.status == 1);
  CHECK(none.has("path=NVRTC SASS"));
}

TEST_CASE("compile: the C API (fatpack_compile) misses, then hits without NVRTC; errors carry the log") {
  const std::string d = case_dir("c_api");
  write_text(d + "/scale.cu", k_template);
  const std::vector<std::string> args{d + "/scale.cu", "--c-api", "--name-expr", "scale<float>", "--kernel",
                                      "scale<float>"};
  auto miss = probe(args, env_for(d));
  INFO(miss.out << miss.err);
  CHECK(miss.status == 0);
  CHECK(miss.has("c_path=1\npath=NVRTC SASS\ntarget=sm_90\n"));
  CHECK(miss.has("c_kernel=ok"));
  auto hit = probe(args, env_for(d));
  INFO(hit.out << hit.err);
  CHECK(hit.has("c_path=0\n"));
  CHECK(hit.has("c_kernel=ok"));
  CHECK(hit.has("nvrtc_loaded=0"));
  write_text(d + "/bad.cu", "__global__ void k() { int x = ; }\n");
  auto bad = probe({d + "/bad.cu", "--c-api"}, env_for(d));
  INFO(bad.out << bad.err);
  CHECK(bad.status == 1);
  CHECK(bad.has("error=FATPACK_ERROR_JIT_FAILED: "));
  CHECK(bad.has("probe.cu(1): error"));
  // A struct from a caller that did not initialise it is refused, not read past.
  fatpack_compile_args zero{};
  fatpack_program* p = nullptr;
  CHECK(fatpack_compile(&zero, &p) == FATPACK_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(fatpack_last_error()).find("FATPACK_COMPILE_ARGS_INIT") != std::string::npos);
  CHECK(p == nullptr);
  fatpack_compile_args no_array = FATPACK_COMPILE_ARGS_INIT;
  no_array.source = "__global__ void k() {}";
  no_array.num_options = 2;
  CHECK(fatpack_compile(&no_array, &p) == FATPACK_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(fatpack_last_error()).find("null array") != std::string::npos);
}

TEST_CASE("compile: a compile error returns NVRTC's log with file and line") {
  const std::string d = case_dir("error");
  write_text(d + "/bad.cu", "__global__ void k(float* x) {\n  x[0] = undeclared_name;\n}\n");
  auto r = probe({d + "/bad.cu"}, env_for(d));
  INFO(r.out << r.err);
  CHECK(r.status == 1);
  CHECK(r.has("error=jit_failed"));
  CHECK(r.has("log=probe.cu(2): error"));
  CHECK(r.has("undeclared_name"));
}

TEST_CASE("compile: a missing NVRTC is a clear error naming what to install") {
  const std::string d = case_dir("missing");
  write_text(d + "/k.cu", "__global__ void k() {}\n");
  auto env = env_for(d);
  env["FATPACK_LIBNVRTC"] = d + "/no/such/libnvrtc.so.13";
  auto r = probe({d + "/k.cu"}, env);
  INFO(r.out << r.err);
  CHECK(r.status == 1);
  CHECK(r.has("error=no_driver: FATPACK_LIBNVRTC=" + d + "/no/such/libnvrtc.so.13: no such library file"));
  CHECK(r.has("install NVRTC"));
  CHECK(r.has("nvrtc_loaded=0"));
  env["FATPACK_LIBNVRTC"] = d + "/k.cu";  // a file, not a library
  auto not_elf = probe({d + "/k.cu"}, env);
  CHECK(not_elf.has("error=no_driver"));
  CHECK(not_elf.has("cannot be identified: not a 64-bit little-endian ELF file"));
  env["FATPACK_LIBNVRTC"] = FAKECUDA_PATH;  // a library, but not NVRTC
  auto other = probe({d + "/k.cu"}, env);
  INFO(other.out << other.err);
  CHECK(other.status == 1);
  CHECK(other.has("error=driver_symbol_missing: " + std::string(FAKECUDA_PATH) + ": entry point nvrtcGetErrorString not found"));
}

TEST_CASE("compile: two devices of different architectures compile in parallel, then both hit") {
  const std::string d = case_dir("two_devices");
  write_text(d + "/k.cu", "extern \"C\" __global__ void k(int* x) { x[threadIdx.x] = threadIdx.x; }\n");
  auto first = probe({d + "/k.cu", "--all-devices", "--kernel", "k"}, env_for(d, "90,86"));
  INFO(first.out << first.err);
  CHECK(first.status == 0);
  CHECK(first.has("device=0 path=NVRTC SASS target=sm_90"));
  CHECK(first.has("device=1 path=NVRTC SASS target=sm_86"));
  auto second = probe({d + "/k.cu", "--all-devices", "--kernel", "k"}, env_for(d, "90,86"));
  INFO(second.out << second.err);
  CHECK(second.has("device=0 path=cache hit target=sm_90"));
  CHECK(second.has("device=1 path=cache hit target=sm_86"));
  CHECK(second.has("nvrtc_loaded=0"));
}

TEST_CASE("compile: a device NVRTC does not know gets PTX through fatpack's JIT") {
  const std::string d = case_dir("ptx_path");
  write_text(d + "/k.cu", "extern \"C\" __global__ void k(int* x) { x[threadIdx.x] = 1; }\n");
  // CC 15.0: newer than every architecture NVRTC 13 knows.
  auto r = probe({d + "/k.cu", "--kernel", "k"}, env_for(d, "150"));
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(r.has("path=NVRTC PTX + JIT target=compute_"));
  CHECK(r.has("does not know sm_150"));
  // The driver refuses the PTX's ISA (a driver older than NVRTC): both versions named.
  auto env = env_for(d, "150");
  env["FAKECUDA_DRIVER_VERSION"] = "12040";
  auto old = probe({d + "/k.cu"}, env);
  INFO(old.out << old.err);
  CHECK(old.status == 1);
  CHECK(old.has("made PTX ISA 9."));
  CHECK(old.has("the driver (CUDA 12.4, PTX ISA up to 8.4)"));
}

TEST_CASE("compile: bounded, checked inputs (in process, before any driver or NVRTC)") {
  fatpack::compile_request r;
  CHECK(fatpack::compile(r).error().code == fatpack::errc::invalid_argument);  // empty source
  r.source = std::string("__global__ void k() {}\0", 23);
  CHECK(fatpack::compile(r).error().message.find("NUL") != std::string::npos);
  r.source = "__global__ void k() {}";
  r.options = {"-arch=sm_80"};
  CHECK(fatpack::compile(r).error().message.find("leave -arch out") != std::string::npos);
  r.options = {std::string(fatpack::detail::k_max_option_bytes + 1, 'x')};
  CHECK(fatpack::compile(r).error().code == fatpack::errc::invalid_argument);
  r.options.clear();
  r.source = std::string(fatpack::detail::k_max_source_bytes + 1, ' ');
  CHECK(fatpack::compile(r).error().message.find("more than") != std::string::npos);
}

TEST_CASE("include scan: names, cycles, symlink loops, unreadable files, bounds") {
  using fatpack::detail::include_names;
  using fatpack::detail::scan_includes;
  auto names = include_names("#include \"a.h\"\n  #  include <b/c.h>\n#include MACRO\n#include_next <d.h>\n"
                             "// #include \"e.h\"\n#include \"unterminated\n",
                             4096);
  CHECK(names == std::vector<std::string>{"a.h", "b/c.h"});

  const std::string d = case_dir("scan");
  write_text(d + "/a.h", "#include \"b.h\"\n");
  write_text(d + "/b.h", "#include \"a.h\"\n#include \"loop.h\"\n#include \"locked.h\"\n");  // a cycle
  ::symlink("loop.h", (d + "/loop.h").c_str());                                            // a symlink loop
  write_text(d + "/locked.h", "x");
  ::chmod((d + "/locked.h").c_str(), 0);
  auto m = scan_includes("#include \"a.h\"\n", {}, {d});
  INFO(m.text());
  CHECK(m.complete);
  CHECK(m.text().find(d + "/a.h=") != std::string::npos);
  CHECK(m.text().find(d + "/b.h=") != std::string::npos);
  CHECK(m.text().find(d + "/loop.h=unreadable") != std::string::npos);
  if (::geteuid() != 0) CHECK(m.text().find(d + "/locked.h=unreadable") != std::string::npos);
  ::chmod((d + "/locked.h").c_str(), 0600);

  fatpack::detail::include_limits tiny;
  tiny.max_files = 1;
  auto bounded = scan_includes("#include \"a.h\"\n", {}, {d}, tiny);
  CHECK_FALSE(bounded.complete);
  CHECK(bounded.problem.find("more than 1 files") != std::string::npos);
  tiny = {};
  tiny.max_file_bytes = 4;
  auto big = scan_includes("#include \"a.h\"\n", {}, {d}, tiny);
  CHECK_FALSE(big.complete);
  // A header given as contents is not looked up on disk.
  // Names are bytes: a file name that is not UTF-8 is found and hashed like any other.
  const std::string odd = "odd\xff\xfe.h";
  write_text(d + "/" + odd, "int odd;\n");
  auto bytes = scan_includes("#include \"" + odd + "\"\n", {}, {d});
  CHECK(bytes.complete);
  REQUIRE(bytes.files.size() == 1);
  CHECK(bytes.files[0].path == d + "/" + odd);
  CHECK(bytes.files[0].state.find(":9") != std::string::npos);  // 9 bytes
  auto given = scan_includes("#include \"a.h\"\n", {{"a.h", "int x;"}}, {d});
  CHECK(given.files.empty());
}

TEST_CASE("build-id: read from the file without loading it") {
  std::string why;
  const std::string id = fatpack::detail::os::elf_build_id(NVRTC_PATH, why);
  INFO(why);
  CHECK(id.size() >= 16);
  CHECK(id.find_first_not_of("0123456789abcdef") == std::string::npos);
  const std::string d = case_dir("build_id");
  write_text(d + "/short", "\x7f" "ELF");
  CHECK(fatpack::detail::os::elf_build_id(d + "/short", why).empty());
  CHECK(fatpack::detail::os::elf_build_id(d, why).empty());
  CHECK(why == "not a regular file");
  CHECK(fatpack::detail::os::elf_build_id(d + "/absent", why).empty());
}
