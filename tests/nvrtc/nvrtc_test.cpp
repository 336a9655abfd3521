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
#include "platform/ld_cache.hpp"
#include "platform/os.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <future>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
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
  auto entry_bytes = [&] {
    std::vector<std::uint8_t> all;
    for (const auto& e : std::filesystem::recursive_directory_iterator(d + "/cache/v1/objects"))
      if (e.path().extension() == ".fpc") {
        auto b = read_file(e.path().string());
        all.insert(all.end(), b.begin(), b.end());
      }
    return all;
  };
  const std::vector<std::uint8_t> stored = entry_bytes();
  REQUIRE(stored.size() > 0);
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
  // The library's package is made around the entry's mapping, which it keeps (it was a copy, and
  // the mapping was gone); the package's head written before the cubin never reaches the file.
  CHECK(hit.has("entry_mappings=1"));
  CHECK(entry_bytes() == stored);
  auto again = probe(args, env_for(d));
  CHECK(again.has("path=cache hit target=sm_90"));
  CHECK(again.has("kernel=ok"));
  // Two devices of one architecture share the hit: the first takes the mapping's room, the second
  // finds it taken and copies (the same package, registered once); twice in one process likewise.
  auto shared = probe({d + "/big.cu", "--kernel", "k14", "--all-devices", "--twice"}, env_for(d, "90,90"));
  CHECK(shared.status == 0);
  CHECK(shared.has("device=0 path=cache hit target=sm_90"));
  CHECK(shared.has("device=1 path=cache hit target=sm_90"));
  std::size_t ok_lines = 0;
  for (std::size_t at = shared.out.find("kernel=ok"); at != std::string::npos; at = shared.out.find("kernel=ok", at + 1))
    ++ok_lines;
  CHECK(ok_lines == 3);  // both devices, then the second compile
  CHECK_FALSE(shared.has("error="));
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
  CHECK(first.has("phases=ok"));  // compile_report's timings: every part measured, within the whole
  CHECK(second.has("phases=ok"));

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
  // A memory-only cache (FATPACK_CACHE_PATH not absolute): compiled, kept for this process only, and
  // the report does not say it was stored (it said stored=1 before).
  {
    auto env = env_for(d);
    env["FATPACK_CACHE_PATH"] = "relative/cache";
    auto mem = probe({d + "/saxpy.cu", "--include", d + "/inc", "--option", "-DMEMORY_ONLY=1"}, env);
    INFO(mem.out << mem.err);
    CHECK(mem.status == 0);
    CHECK(mem.has("path=NVRTC SASS target=sm_90 stored=0"));
    CHECK(mem.has("not_cached=the cache is memory-only"));
  }
  // A writable cache whose write fails (every fan-out directory writable by others, refused; found
  // by an attacker review): not stored, and the report says so and why. Before, it said stored=1
  // with no reason, and every process compiled again.
  {
    auto env = env_for(d);
    const std::string c = d + "/refusing-cache";
    env["FATPACK_CACHE_PATH"] = c;
    ::mkdir(c.c_str(), 0700);
    ::mkdir((c + "/v1").c_str(), 0700);
    ::mkdir((c + "/v1/objects").c_str(), 0700);
    for (int i = 0; i < 256; ++i) {
      char fan[3];
      std::snprintf(fan, sizeof fan, "%02x", i);
      const std::string f = c + "/v1/objects/" + fan;
      ::mkdir(f.c_str(), 0777);
      ::chmod(f.c_str(), 0777);
    }
    auto refused = probe({d + "/saxpy.cu", "--include", d + "/inc", "--option", "-DREFUSED=1"}, env);
    INFO(refused.out << refused.err);
    CHECK(refused.status == 0);
    CHECK(refused.has("path=NVRTC SASS target=sm_90 stored=0"));
    CHECK(refused.has("not_cached=the cache did not store it: "));
  }
  // Another option is a miss.
  {
    auto other = probe({d + "/saxpy.cu", "--include", d + "/inc", "--option", "-DUNUSED=1"}, env_for(d));
    INFO(other.out << other.err);
    CHECK(other.has("path=NVRTC SASS"));
  }
}

TEST_CASE("compile: headers NVRTC finds beside the program, through -I=dir, or behind #include_next are in the key") {
  // NVRTC looks a quoted include of the source up in the directory of the program's name (the
  // working directory for a bare name), one of a header given as contents in that of the header's
  // name, and reads "-I=dir" as "-I" "dir". None of these files was in the key: after an edit, a
  // later process got a cache hit of the old program.
  const std::string d = case_dir("beside");
  write_text(d + "/saxpy.cu", k_saxpy);
  write_text(d + "/coef.h", "#define COEF 2.0f\n");
  const std::vector<std::string> beside{d + "/saxpy.cu", "--name", d + "/saxpy.cu", "--kernel", "saxpy"};
  auto first = probe(beside, env_for(d));
  CHECK(first.has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
  write_text(d + "/coef.h", "#define COEF 3.0f\n");
  auto edited = probe(beside, env_for(d));
  CHECK(edited.has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
  CHECK(probe(beside, env_for(d)).has("path=cache hit"));

  // A bare program name: the working directory.
  ::mkdir((d + "/cwd").c_str(), 0700);
  write_text(d + "/cwd/coef.h", "#define COEF 2.0f\n");
  const std::vector<std::string> bare{d + "/saxpy.cu", "--cwd", d + "/cwd", "--kernel", "saxpy"};
  CHECK(probe(bare, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
  write_text(d + "/cwd/coef.h", "#define COEF 4.0f\n");
  CHECK(probe(bare, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));

  // An include path that starts with '=' is that directory, not the one without it (NVRTC reads
  // "-I=dir" as "dir": fatpack passed "-I" + path).
  ::mkdir((d + "/cwd/=odd").c_str(), 0700);
  ::mkdir((d + "/cwd/odd").c_str(), 0700);
  ::rename((d + "/cwd/coef.h").c_str(), (d + "/cwd/=odd/coef.h").c_str());
  write_text(d + "/cwd/odd/coef.h", "#error the wrong directory\n");
  auto odd = probe({d + "/saxpy.cu", "--cwd", d + "/cwd", "--include", "=odd", "--kernel", "saxpy"}, env_for(d));
  CHECK(odd.has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));

  // A header given as contents, named with a directory, includes a file of that directory.
  ::mkdir((d + "/given").c_str(), 0700);
  write_text(d + "/main.cu", std::string("#include \"") + d + "/given/wrap.h\"\n" + (k_saxpy + 18));
  write_text(d + "/wrap.h", "#include \"coef.h\"\n");
  write_text(d + "/given/coef.h", "#define COEF 5.0f\n");
  const std::vector<std::string> given{d + "/main.cu", "--header", d + "/given/wrap.h=" + d + "/wrap.h",
                                       "--kernel", "saxpy"};
  CHECK(probe(given, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
  write_text(d + "/given/coef.h", "#define COEF 6.0f\n");
  CHECK(probe(given, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));

  // -I=dir: NVRTC reads the directory "dir", not "=dir".
  ::mkdir((d + "/inc").c_str(), 0700);
  write_text(d + "/inc/coef.h", "#define COEF 2.0f\n");
  const std::vector<std::string> eq{d + "/saxpy.cu", "--option", "-I=" + d + "/inc", "--kernel", "saxpy"};
  CHECK(probe(eq, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
  write_text(d + "/inc/coef.h", "#define COEF 7.0f\n");
  CHECK(probe(eq, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));

  // White space: NVRTC drops it (space, tab, newline, CR, VT, FF) around every option and after -I
  // ("-I  dir" is "dir"), and so around an include path of the request (passed as "-I=" + path) and
  // the word after a lone "-I". Each of these found the header while the scan looked for
  // "inc\t" or "inc " and found nothing: an edit was a stale hit.
  int coef = 20;
  const std::vector<std::vector<std::string>> spellings{
      {"--option", "-I  " + d + "/inc"},           {"--option", " -I" + d + "/inc "},
      {"--option", "--include-path=" + d + "/inc "}, {"--option", "-I" + d + "/inc\t"},
      {"--option", "\n-I" + d + "/inc\r"},          {"--option", "-I=" + d + "/inc\v\f"},
      {"--include", d + "/inc "},                  {"--include", d + "/inc\t"},
      {"--option", "-I", "--option", "\t" + d + "/inc "}};
  for (const auto& spelling : spellings) {
    INFO(spelling.back());
    std::vector<std::string> spaced{d + "/saxpy.cu", "--kernel", "saxpy"};
    spaced.insert(spaced.end(), spelling.begin(), spelling.end());
    CHECK(probe(spaced, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
    write_text(d + "/inc/coef.h", "#define COEF " + std::to_string(++coef) + ".0f\n");
    CHECK(probe(spaced, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
  }

  // After a joined -I NVRTC drops spaces only: "-I\tinc" is the directory "\tinc" (here beside
  // "inc", whose header would break the compile). The scan read "inc": an edit was a stale hit.
  ::mkdir((d + "/cwd/\tinc").c_str(), 0700);
  ::mkdir((d + "/cwd/inc").c_str(), 0700);
  write_text(d + "/cwd/\tinc/coef.h", "#define COEF 2.0f\n");
  write_text(d + "/cwd/inc/coef.h", "#error the wrong directory\n");
  const std::vector<std::string> tabbed{d + "/saxpy.cu", "--cwd", d + "/cwd", "--option", "-I\tinc", "--kernel", "saxpy"};
  CHECK(probe(tabbed, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
  write_text(d + "/cwd/\tinc/coef.h", "#define COEF 3.0f\n");
  CHECK(probe(tabbed, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));

  // --pre-include / -include: NVRTC looks the file up in the working directory and the include paths.
  ::mkdir((d + "/pre").c_str(), 0700);
  write_text(d + "/pre/coef.h", "#define COEF 2.0f\n");
  write_text(d + "/noinc.cu", k_saxpy + 18);
  for (const std::vector<std::string>& opts :
       {std::vector<std::string>{"--option", "--pre-include=coef.h"}, {"--option", "-include", "--option", "coef.h"}}) {
    std::vector<std::string> pre{d + "/noinc.cu", "--include", d + "/pre", "--kernel", "saxpy"};
    pre.insert(pre.end(), opts.begin(), opts.end());
    CHECK(probe(pre, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
    write_text(d + "/pre/coef.h", "#define COEF " + std::to_string(10 + opts.size()) + ".0f\n");
    CHECK(probe(pre, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
  }

  // #include_next in a header on the include path (include_names reads it): end to end.
  ::mkdir((d + "/wrapdir").c_str(), 0700);
  ::mkdir((d + "/next").c_str(), 0700);
  write_text(d + "/wrapdir/coef.h", "#include_next <real.h>\n");
  write_text(d + "/next/real.h", "#define COEF 8.0f\n");
  const std::vector<std::string> next{d + "/saxpy.cu", "--include", d + "/wrapdir", "--include", d + "/next",
                                      "--kernel", "saxpy"};
  CHECK(probe(next, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=2 kernel=ok"));
  write_text(d + "/next/real.h", "#define COEF 9.0f\n");
  CHECK(probe(next, env_for(d)).has("path=NVRTC SASS target=sm_90 stored=1 deps=2 kernel=ok"));
}

// Opens `fifo` for writing once a reader has it open (NVRTC in __has_include), which lets that reader
// go on; gives up when `child` ends first (a hit: NVRTC never ran). True when a reader was let go.
bool release_reader(const std::string& fifo, std::future<child_result>& child) {
  while (child.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready) {
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // ENXIO while no reader
    if (w >= 0) {
      ::close(w);
      return true;
    }
  }
  return false;
}

TEST_CASE("compile: a header edited while NVRTC compiles is not stored under the key of its old contents") {
  // The key is made from the headers as the scan read them; NVRTC reads them later. An edit in
  // between stored the new program under the old contents' key: once the header was back as it was,
  // every process got the edited program from the cache. NVRTC 13.0 opens a FIFO that
  // __has_include asks about and waits for a writer, which holds the compile at a known point here.
  const std::string d = case_dir("edited_during");
  ::mkdir((d + "/inc").c_str(), 0700);
  REQUIRE(::mkfifo((d + "/inc/hold1.h").c_str(), 0600) == 0);
  REQUIRE(::mkfifo((d + "/inc/hold2.h").c_str(), 0600) == 0);
  write_text(d + "/inc/name.h", "#define KNAME kern_a\n");
  write_text(d + "/k.cu",
             "#if __has_include(\"hold1.h\")\n#endif\n#if __has_include(\"hold2.h\")\n#endif\n#include \"name.h\"\n"
             "extern \"C\" __global__ void KNAME(float* y) { y[0] = 1.0f; }\n");
  auto run = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> argv{NVRTC_PROBE_PATH, d + "/k.cu", "--include", d + "/inc"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::async(std::launch::async, [argv, env = env_for(d)] { return run_child(argv, env); });
  };
  auto first = run({});
  REQUIRE(release_reader(d + "/inc/hold1.h", first));  // NVRTC is past the scan, now held at hold2.h
  write_text(d + "/inc/name.h", "#define KNAME kern_b\n");
  REQUIRE(release_reader(d + "/inc/hold2.h", first));
  const child_result edited = first.get();
  INFO(edited.out << edited.err);
  CHECK(edited.has("path=NVRTC SASS target=sm_90 stored=0"));
  CHECK(edited.has("not_cached=a file reachable through #include changed during the compile: " + d + "/inc/name.h"));

  // The header as it was: NVRTC compiles it (a hit would be kern_b's code), and that is stored.
  write_text(d + "/inc/name.h", "#define KNAME kern_a\n");
  auto second = run({"--kernel", "kern_a"});
  release_reader(d + "/inc/hold1.h", second);
  release_reader(d + "/inc/hold2.h", second);
  const child_result again = second.get();
  INFO(again.out << again.err);
  CHECK(again.status == 0);
  CHECK(again.has("path=NVRTC SASS target=sm_90 stored=1 deps=3 kernel=ok"));
}

TEST_CASE("compile: code fatpack cannot load is not stored") {
  // -rdc=true makes a relocatable cubin the registry refuses. It was stored before the load refused
  // it, so every later process "hit" it and failed without NVRTC (and without NVRTC's log).
  const std::string d = case_dir("unloadable");
  write_text(d + "/k.cu", "extern \"C\" __global__ void k(float* y) { y[0] = 1.0f; }\n");
  const std::vector<std::string> args{d + "/k.cu", "--option", "-rdc=true"};
  for (int i = 0; i < 2; ++i) {
    auto r = probe(args, env_for(d));
    CHECK(r.status == 1);
    CHECK(r.has("error=bad_package: fatpack::compile: the code NVRTC made for sm_90 is not loadable"));
    CHECK(r.has("nvrtc_loaded=1"));  // NVRTC ran both times: nothing was stored
  }
}

// The date `hours_east` of UTC (a POSIX TZ "X-14" is 14 hours east), as a process there reads it.
std::string date_at(int hours_east) {
  const std::time_t now = std::time(nullptr) + std::time_t(hours_east) * 3600;
  std::tm tm{};
  char out[16] = {};
  ::gmtime_r(&now, &tm);
  std::strftime(out, sizeof out, "%Y-%m-%d", &tm);
  return out;
}

TEST_CASE("compile: __TIME__ anywhere is not cached; __DATE__ keys the day") {
  // The preprocessor's clock: a program that bakes __TIME__ in was served, from the cache, the time
  // of its first compile in every later process. (NVRTC 13.0 has no __TIMESTAMP__.)
  const std::string d = case_dir("clock");
  ::mkdir((d + "/inc").c_str(), 0700);
  write_text(d + "/saxpy.cu", k_saxpy);
  write_text(d + "/inc/coef.h", "#define COEF (sizeof(__TIME__) * 1.0f)\n");  // in a header on the path
  const std::vector<std::string> args{d + "/saxpy.cu", "--include", d + "/inc", "--kernel", "saxpy"};
  for (int i = 0; i < 2; ++i) {
    auto r = probe(args, env_for(d));
    CHECK(r.has("path=NVRTC SASS target=sm_90 stored=0 deps=1 kernel=ok"));
    CHECK(r.has("not_cached=the program uses __TIME__ in " + d + "/inc/coef.h"));
  }
  // Spelled across a line splice (NVRTC joins it), or brought in by an option: the same.
  write_text(d + "/inc/coef.h", "#define COEF (sizeof(__TI\\\nME__) * 1.0f)\n");
  auto spliced = probe(args, env_for(d));
  CHECK(spliced.has("path=NVRTC SASS target=sm_90 stored=0 deps=1 kernel=ok"));
  CHECK(spliced.has("not_cached=the program uses __TIME__ in " + d + "/inc/coef.h"));
  write_text(d + "/inc/coef.h", "#define COEF (sizeof(STAMP) * 1.0f)\n");
  std::vector<std::string> with_option = args;
  with_option.insert(with_option.end(), {"--option", "-DSTAMP=__TIME__"});
  auto optioned = probe(with_option, env_for(d));
  CHECK(optioned.has("path=NVRTC SASS target=sm_90 stored=0 deps=1 kernel=ok"));
  CHECK(optioned.has("not_cached=the program uses __TIME__ in option '-DSTAMP=__TIME__'"));
  // __DATE__ in the source: cached under a key that holds the local day. Two time zones 26 hours
  // apart are never on the same date: the second is a miss; the first again is a hit (unless its
  // day ended meanwhile: then a miss is right).
  write_text(d + "/inc/coef.h", "#define COEF 2.0f\n");
  write_text(d + "/dated.cu", std::string("static const char built[] = __DATE__;\n") + k_saxpy);
  const std::vector<std::string> dated{d + "/dated.cu", "--include", d + "/inc", "--kernel", "saxpy"};
  auto east = env_for(d), west = env_for(d);
  east["TZ"] = "EAST-14";
  west["TZ"] = "WEST+12";
  const std::string east_day = date_at(14);
  CHECK(probe(dated, east).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
  CHECK(probe(dated, west).has("path=NVRTC SASS target=sm_90 stored=1 deps=1 kernel=ok"));
  auto again = probe(dated, east);
  if (date_at(14) == east_day) CHECK(again.has("path=cache hit target=sm_90"));
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
  write_text(d + "/extra.h", "#define EXTRA 1\n");
  write_text(d + "/scale.cu", "#include \"extra.h\"\n" + std::string(k_template));
  const std::vector<std::string> args{d + "/scale.cu", "--c-api", "--include", d, "--name-expr", "scale<float>",
                                      "--kernel", "scale<float>"};
  auto miss = probe(args, env_for(d));
  INFO(miss.out << miss.err);
  CHECK(miss.status == 0);
  CHECK(miss.has("c_path=1\npath=NVRTC SASS\ntarget=sm_90\n"));
  CHECK(miss.has("\nstored=1\nnot_cached=\n"));  // the C report carries what the C++ one does
  CHECK(miss.has("\nnvrtc_version=13."));
  // The manifest's files, not only their count (before: "dependencies=1" alone).
  CHECK(miss.has("\ndependencies=1\ndependency=" + d + "/extra.h\nnvrtc_ms="));
  CHECK(miss.has("c_kernel=ok"));
  auto hit = probe(args, env_for(d));
  INFO(hit.out << hit.err);
  CHECK(hit.has("c_path=0\n"));
  CHECK(hit.has("\nstored=0\nnot_cached=\n"));  // a hit stores nothing and is cached
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
  CHECK(r.has("error=no_driver: FATPACK_LIBNVRTC=" + d + "/no/such/libnvrtc.so.13: not a readable regular file"));
  // The variable chose the file: the hint is to fix the variable (it named a search path before).
  CHECK(r.has("point FATPACK_LIBNVRTC at NVRTC's library (libnvrtc.so.13"));
  CHECK_FALSE(r.has("add its directory to LD_LIBRARY_PATH"));
  CHECK(r.has("nvrtc_loaded=0"));
  env["FATPACK_LIBNVRTC"] = d + "/k.cu";  // a file, not a library
  auto not_elf = probe({d + "/k.cu"}, env);
  CHECK(not_elf.has("error=no_driver"));
  CHECK(not_elf.has("cannot be identified: not a 64-bit little-endian ELF file"));
  {
    // A library cut short (a copy that ran out of disk): dlopen would map it and the process would
    // die of SIGBUS; on a miss, before it is loaded, it is refused with the reason. (Its identity
    // survives: a hit never loads it, see the PTX-path case.)
    std::ifstream in(FAKECUDA_PATH, std::ios::binary);
    std::string lib((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(loadable_end(lib) > 8192);
    write_text(d + "/libnvrtc.so.13", lib.substr(0, loadable_end(lib) / 2));
    env["FATPACK_LIBNVRTC"] = d + "/libnvrtc.so.13";
    auto cut = probe({d + "/k.cu"}, env);
    INFO(cut.out << cut.err);
    CHECK(cut.status == 1);
    CHECK(cut.has("error=no_driver"));
    CHECK(cut.has("cannot load NVRTC " + d + "/libnvrtc.so.13: " + d +
                  "/libnvrtc.so.13: truncated: a loadable segment ends at byte"));
    CHECK(cut.has("nvrtc_loaded=0"));
  }
  env["FATPACK_LIBNVRTC"] = FAKECUDA_PATH;  // a library, but not NVRTC
  auto other = probe({d + "/k.cu"}, env);
  INFO(other.out << other.err);
  CHECK(other.status == 1);
  CHECK(other.has("error=driver_symbol_missing: " + std::string(FAKECUDA_PATH) + ": entry point nvrtcGetErrorString not found"));
}

TEST_CASE("compile: once a process has loaded NVRTC, its compiles are keyed by that library, also after the file changes") {
  // An update replaces the file at NVRTC's path while a process that loaded the old one runs; here
  // FATPACK_LIBNVRTC moves to another file between two misses of one process. The second compile
  // runs the loaded library, so its code must be stored under that library's identity: it was stored
  // under the new file's, where no process running that NVRTC would ever find it, and where a
  // process running the new one would be served the old compiler's code.
  const std::string d = case_dir("loaded_identity");
  write_text(d + "/k.cu", "extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }\n");
  auto env = env_for(d);
  auto r = probe({d + "/k.cu", "--twice", "--then-env", std::string("FATPACK_LIBNVRTC=") + FAKECUDA_PATH,
                  "--then-option", "-DSECOND=1"},
                 env);
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  std::vector<std::string> compilers;
  for (std::size_t p = r.out.find("compiler="); p != std::string::npos; p = r.out.find("compiler=", p + 1))
    compilers.push_back(r.out.substr(p, r.out.find('\n', p) - p));
  REQUIRE(compilers.size() == 2);
  CHECK(compilers[0].find("build-id") != std::string::npos);
  CHECK(compilers[1] == compilers[0]);
  CHECK(r.out.find("path=NVRTC SASS target=sm_90 stored=1") != r.out.rfind("path=NVRTC SASS target=sm_90 stored=1"));
  // A fresh process with that NVRTC finds the second program.
  auto hit = probe({d + "/k.cu", "--option", "-DSECOND=1"}, env);
  INFO(hit.out << hit.err);
  CHECK(hit.has("path=cache hit target=sm_90"));
  CHECK(hit.has("nvrtc_loaded=0"));
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

namespace {

// A stand-in for NVRTC that has NVRTC's identity but cannot be loaded: the real file's first bytes up
// to its build-id note (ELF header, program headers, notes), and the builtins libraries beside it
// as symlinks (their build-ids are in the identity too). A compile that reaches dlopen fails with it
// (or dies of SIGBUS mapping the cut file); a hit never gets there.
std::string unloadable_nvrtc(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path real = fs::canonical(NVRTC_PATH);
  std::vector<std::uint8_t> bytes(1 << 20);  // the headers and notes are at the start of the 105 MB file
  {
    std::ifstream f(real, std::ios::binary);
    f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    bytes.resize(static_cast<std::size_t>(f.gcount()));
  }
  REQUIRE(bytes.size() > sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  std::size_t end = eh.e_phoff + std::size_t(eh.e_phnum) * eh.e_phentsize;
  REQUIRE(end <= bytes.size());
  for (std::size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * eh.e_phentsize, sizeof ph);
    if (ph.p_type == PT_NOTE) end = std::max<std::size_t>(end, ph.p_offset + ph.p_filesz);
  }
  REQUIRE(end <= bytes.size());
  REQUIRE(end < fs::file_size(real) / 2);  // far too short to be mapped
  fs::create_directories(dir);
  const std::string stub = dir + "/" + real.filename().string();
  write_file(stub, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(end)));
  for (const auto& e : fs::directory_iterator(real.parent_path()))
    if (e.path().filename().string().rfind("libnvrtc-builtins.so.", 0) == 0)
      fs::create_symlink(e.path(), dir + "/" + e.path().filename().string());
  return stub;
}

}  // namespace

TEST_CASE("compile: the PTX path's SASS is kept under the source key and the driver; a hit runs neither NVRTC nor the JIT") {
  const std::string d = case_dir("ptx_cache");
  write_text(d + "/k.cu", "#include \"coef.h\"\nextern \"C\" __global__ void k(int* x) { x[threadIdx.x] = COEF; }\n");
  ::mkdir((d + "/inc").c_str(), 0700);
  write_text(d + "/inc/coef.h", "#define COEF 2\n");
  const std::vector<std::string> args{d + "/k.cu", "--include", d + "/inc", "--kernel", "k"};
  const std::string jit_log = d + "/jit.log";
  auto env = env_for(d, "150");  // CC 15.0: newer than every architecture NVRTC 13 knows
  env["FAKECUDA_JIT_LOG"] = jit_log;
  auto stubbed = env;
  stubbed["FATPACK_LIBNVRTC"] = unloadable_nvrtc(d + "/stub");

  auto first = probe(args, env);
  CHECK(first.status == 0);
  CHECK(first.has("path=NVRTC PTX + JIT target=compute_"));
  CHECK(first.has("stored=1"));
  CHECK(first.has("kernel=ok"));
  CHECK_FALSE(first.has("not_cached="));
  CHECK(first.has("nvrtc_loaded=1"));
  CHECK(count_lines(jit_log) == 1);

  // A fresh process with an NVRTC that cannot be loaded: the SASS from the source cache, no JIT.
  auto hit = probe(args, stubbed);
  CHECK(hit.status == 0);
  CHECK(hit.has("path=cache hit target=sm_150"));
  CHECK(hit.has("kernel=ok"));
  CHECK(hit.has("the SASS fatpack's JIT made from NVRTC's PTX with this driver (CUDA 13.0)"));
  CHECK(hit.has("nvrtc_loaded=0"));
  CHECK(count_lines(jit_log) == 1);

  // Another driver version: a miss (never SASS another driver's JIT made). With exact JIT cache hits
  // only, that driver JITs and stores its own; its next process hits.
  {
    auto other = env;
    other["FAKECUDA_DRIVER_VERSION"] = "13010";
    other["FATPACK_CACHE_OTHER_DRIVER"] = "0";
    auto miss = probe(args, other);
    CHECK(miss.status == 0);
    CHECK(miss.has("path=NVRTC PTX + JIT"));
    CHECK(miss.has("stored=1"));
    CHECK(miss.has("nvrtc_loaded=1"));
    CHECK(count_lines(jit_log) == 2);
    other["FATPACK_LIBNVRTC"] = stubbed["FATPACK_LIBNVRTC"];
    auto again = probe(args, other);
    CHECK(again.has("path=cache hit target=sm_150"));
    CHECK(again.has("with this driver (CUDA 13.1)"));
    CHECK(count_lines(jit_log) == 2);
    CHECK(probe(args, stubbed).has("path=cache hit"));  // the first driver's entry is still its own
  }
  // The same version with another build string (the cache's driver identity): a miss too. A JIT
  // cache entry of the other build is used meanwhile, so this SASS is not stored.
  {
    write_text(d + "/nvidia-version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Release Build\n");
    auto build = env;
    build["FATPACK_DRIVER_VERSION_FILE"] = d + "/nvidia-version";
    auto miss = probe(args, build);
    CHECK(miss.has("path=NVRTC PTX + JIT"));
    CHECK(miss.has("stored=0"));
    CHECK(miss.has("not_cached=PTX: not stored under the source key: the JIT cache gave SASS another driver built"));
    CHECK(miss.has("nvrtc_loaded=1"));
  }
  // An edited header on the include path: a miss, then a hit again (in the same process too: the
  // SASS is registered beside NVRTC's PTX, under another package name).
  {
    write_text(d + "/inc/coef.h", "#define COEF 3\n");
    auto twice = args;
    twice.push_back("--twice");
    auto edited = probe(twice, env);
    CHECK(edited.status == 0);
    CHECK(edited.has("path=NVRTC PTX + JIT"));
    CHECK(edited.has("stored=1"));
    CHECK(edited.has("path=cache hit target=sm_150"));
    CHECK(edited.has("nvrtc_loaded=1"));
    const int jits = count_lines(jit_log);
    auto again = probe(args, stubbed);
    CHECK(again.has("path=cache hit target=sm_150"));
    CHECK(again.has("nvrtc_loaded=0"));
    CHECK(count_lines(jit_log) == jits);
  }
  // Devices of both kinds at once: two of CC 15.0 share one compile and one store, CC 9.0 gets
  // NVRTC's SASS; then all three hit.
  {
    auto three = env_for(d, "150,150,90");
    three["FAKECUDA_JIT_LOG"] = jit_log;
    const std::vector<std::string> all{d + "/k.cu", "--include", d + "/inc", "--option", "-DTHREE=1", "--all-devices",
                                       "--kernel", "k"};
    auto first3 = probe(all, three);
    CHECK(first3.status == 0);
    // The option does not change NVRTC's PTX: the JIT cache has its SASS (this driver's), which is
    // stored under the new source key.
    auto line_of = [&](const std::string& start) {
      const std::size_t p = first3.out.find(start);
      return p == std::string::npos ? std::string() : first3.out.substr(p, first3.out.find('\n', p) - p);
    };
    CHECK(line_of("device=0 ").find("path=NVRTC PTX + JIT target=compute_") != std::string::npos);
    CHECK(line_of("device=0 ").find("stored=1") != std::string::npos);
    CHECK(line_of("device=1 ").find("path=NVRTC PTX + JIT target=compute_") != std::string::npos);
    CHECK(line_of("device=1 ").find("stored=1") != std::string::npos);
    CHECK(first3.has("device=2 path=NVRTC SASS target=sm_90 stored=1"));
    const int jits = count_lines(jit_log);
    three["FATPACK_LIBNVRTC"] = stubbed["FATPACK_LIBNVRTC"];
    auto hit3 = probe(all, three);
    CHECK(hit3.status == 0);
    CHECK(hit3.has("device=0 path=cache hit target=sm_150"));
    CHECK(hit3.has("device=1 path=cache hit target=sm_150"));
    CHECK(hit3.has("device=2 path=cache hit target=sm_90"));
    CHECK(hit3.has("nvrtc_loaded=0"));
    CHECK(count_lines(jit_log) == jits);
  }
  // A read-only cache: a miss compiles, stores nothing, and says why.
  {
    auto ro = env;
    ro["FATPACK_CACHE_READONLY"] = "1";
    auto miss = probe({d + "/k.cu", "--include", d + "/inc", "--option", "-DREAD_ONLY=1"}, ro);
    CHECK(miss.has("path=NVRTC PTX + JIT"));
    CHECK(miss.has("stored=0"));
    CHECK(miss.has("not_cached=the cache is read-only"));
  }
  // A memory-only cache: the JIT's SASS is kept for this process only, and the report says so.
  {
    auto mem = env;
    mem["FATPACK_CACHE_PATH"] = "relative/cache";
    auto miss = probe({d + "/k.cu", "--include", d + "/inc", "--option", "-DMEMORY_ONLY=1"}, mem);
    INFO(miss.out << miss.err);
    CHECK(miss.has("path=NVRTC PTX + JIT"));
    CHECK(miss.has("stored=0"));
    CHECK(miss.has("not_cached=the cache is memory-only"));
  }
  // use_cache = false: NVRTC and the JIT run, nothing is stored under the source key.
  {
    auto off = probe({d + "/k.cu", "--include", d + "/inc", "--no-cache"}, env);
    CHECK(off.has("path=NVRTC PTX + JIT"));
    CHECK(off.has("stored=0"));
    CHECK(off.has("not_cached=compile_options::use_cache is false"));
  }
}

TEST_CASE("compile: two processes compiling one PTX-path program together: one NVRTC compile, one JIT") {
  // The source key's compile lock is held until the JIT's SASS is stored: the second process waits,
  // then hits. The JIT takes 1 s, so the two overlap.
  const std::string d = case_dir("ptx_single_flight");
  write_text(d + "/k.cu", "extern \"C\" __global__ void k(int* x) { x[threadIdx.x] = 7; }\n");
  auto env = env_for(d, "150");
  env["FAKECUDA_JIT_LOG"] = d + "/jit.log";
  env["FAKECUDA_JIT_DELAY_MS"] = "1000";
  const std::string p = NVRTC_PROBE_PATH;
  auto r = run_child({"/bin/sh", "-c",
                      "'" + p + "' '" + d + "/k.cu' > '" + d + "/a.out' 2>&1 & '" + p + "' '" + d + "/k.cu' > '" + d +
                          "/b.out' 2>&1; wait"},
                     env);
  const std::string a = read_text(d + "/a.out"), b = read_text(d + "/b.out");
  INFO(a << "\n" << b << r.err);
  auto count = [&](const std::string& what) {
    return int(a.find(what) != std::string::npos) + int(b.find(what) != std::string::npos);
  };
  CHECK(count("path=NVRTC PTX + JIT") == 1);
  CHECK(count("path=cache hit target=sm_150") == 1);
  CHECK(count("nvrtc_loaded=1") == 1);
  CHECK(count_lines(d + "/jit.log") == 1);
}

TEST_CASE("compile: bounded, checked inputs (in process, before any driver or NVRTC)") {
  fatpack::compile_request r;
  CHECK(fatpack::compile(r).error().code == fatpack::errc::invalid_argument);  // empty source
  r.source = std::string("__global__ void k() {}\0", 23);
  CHECK(fatpack::compile(r).error().message.find("NUL") != std::string::npos);
  r.source = "__global__ void k() {}";
  r.options = {"-arch=sm_80"};
  CHECK(fatpack::compile(r).error().message.find("leave -arch out") != std::string::npos);
  // NVRTC ignores spaces around an option: " -arch=sm_80" was let through, NVRTC took it after
  // fatpack's own -arch, and sm_80 code was stored under the sm_90 key (a load error, every miss).
  for (const char* spaced : {" -arch=sm_80", "  --gpu-architecture=sm_80 ", " -code=sm_80"}) {
    INFO(spaced);
    r.options = {spaced};
    CHECK(fatpack::compile(r).error().message.find("leave -arch out") != std::string::npos);
  }
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
  CHECK(names == std::vector<std::string>{"a.h", "b/c.h", "d.h"});
  {  // The preprocessor's clock, in the source or a given header; nothing else sets it.
    const auto plain = scan_includes("int x;", {{"g.h", "int y;"}}, {});
    CHECK(plain.time_macro.empty());
    CHECK_FALSE(plain.date_macro);
    const auto dated = scan_includes("const char d[] = __DATE__;", {}, {});
    CHECK(dated.date_macro);
    CHECK(dated.time_macro.empty());
    const auto timed = scan_includes("int x;", {{"g.h", "// __TIME__\n"}}, {});
    CHECK(timed.time_macro == "__TIME__ in header g.h");
    CHECK_FALSE(timed.date_macro);
    // An empty text (a default string_view, null data: UBSan's null-pointer check in the
    // sanitizer job caught memchr given it through the pre-include item).
    fatpack::detail::include_manifest none;
    fatpack::detail::note_clock_macros(std::string_view(), "nothing", none);
    CHECK(none.time_macro.empty());
    CHECK(scan_includes({}, {}, {}, {}, {}, {"absent.h"}).files.empty());
  }
  // Every spelling NVRTC 13.0 reads as an include (each checked with it): a line splice anywhere in
  // the directive, comments around its words (one spanning lines), the digraph %: and the trigraph
  // ??= (C++11 mode), #include_next, #import, and __has_include (a header created later changes the
  // program). Each was missed before, so editing that header gave a stale hit.
  auto spelled = include_names("#\\\ninclude \"s1.h\"\n#inc\\\r\nlude \"s2.h\"\n#include /* c */ \"s3.h\"\n"
                               "/* x */ # /* y\n */ include <s4.h>\n%:include \"s5.h\"\n?\?=include \"s6.h\"\n"
                               "#include_next <s7.h>\n#import \"s8.h\"\n#if __has_include(\"s9.h\") && "
                               "__has_include_next( <s10.h> )\n#endif\n#includex \"no.h\"\n#include\\\n\"s11.h\"\n",
                               4096);
  for (const char* n : {"s1.h", "s2.h", "s3.h", "s4.h", "s5.h", "s6.h", "s7.h", "s8.h", "s9.h", "s10.h", "s11.h"}) {
    INFO(n);
    CHECK(std::count(spelled.begin(), spelled.end(), std::string(n)) == 1);
  }
  CHECK(std::count(spelled.begin(), spelled.end(), std::string("no.h")) == 0);
  // A file of comment openers closed at its end: linear, not quadratic (a 16 MiB header would take hours).
  {
    std::string openers;
    for (int i = 0; i < 200000; ++i) openers += "/* #include \"y.h\"\n";
    openers += "*/ #include \"x.h\"\n";  // each opener's comment ends here
    const auto t0 = std::chrono::steady_clock::now();
    auto many = include_names(openers, 4096);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
    CHECK(many == std::vector<std::string>{"x.h"});
  }

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

  // One file reached through a symlink in another directory: NVRTC looks its quoted includes up in
  // the directory it was reached through (the symlink's), so each such directory is scanned. Before,
  // the file was scanned once, from its first directory: y/b.h was not in the key.
  {
    const std::string s = case_dir("scan_symlinked");
    ::mkdir((s + "/x").c_str(), 0700);
    ::mkdir((s + "/y").c_str(), 0700);
    write_text(s + "/x/a.h", "#include \"b.h\"\n");
    write_text(s + "/x/b.h", "#define B 1\n");
    write_text(s + "/y/b.h", "#define B 2\n");
    ::symlink("../x/a.h", (s + "/y/a.h").c_str());
    auto linked = scan_includes("#include \"x/a.h\"\n#include \"y/a.h\"\n", {}, {s});
    INFO(linked.text());
    CHECK(linked.text().find(s + "/x/b.h=") != std::string::npos);
    CHECK(linked.text().find(s + "/y/b.h=") != std::string::npos);
    // A directory symlink loop still ends (one scan per real file and real directory).
    ::symlink(".", (s + "/x/loop").c_str());
    write_text(s + "/x/c.h", "#include \"loop/c.h\"\n");
    auto looped = scan_includes("#include \"x/c.h\"\n", {}, {s});
    CHECK(looped.complete);
    CHECK(looped.files.size() == 2);  // x/c.h, x/loop/c.h
  }

  // The scan stats a file, then reads it: a FIFO put there in between (or a package path that is
  // one, registry::add_file) blocked the read's open for ever, waiting for a writer. Now an error.
  {
    const std::string fifo = d + "/swapped.h";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto reading = std::async(std::launch::async, [&] {
      std::string why;
      auto bytes = fatpack::detail::os::read_file(fifo, 1 << 20, why);
      return bytes ? std::string("read") : why;
    });
    const bool done = reading.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    if (!done) {  // unblock the open so the test ends
      const int w = ::open(fifo.c_str(), O_WRONLY);
      if (w >= 0) ::close(w);
    }
    CHECK(done);
    CHECK(reading.get() == "not a regular file");
  }

  // A file whose size says less than it holds (procfs: 0 bytes) is read to its end, as NVRTC reads
  // it: it was hashed as empty, and a header under /proc that changed was a stale hit.
  {
    std::string why;
    auto status = fatpack::detail::os::read_file("/proc/self/status", 1 << 20, why);
    REQUIRE(status);
    const std::string text(status->begin(), status->end());
    CHECK(text.find("Name:") != std::string::npos);
    CHECK(fatpack::detail::os::read_file("/proc/self/status", 16, why) == nullptr);  // still bounded
    CHECK(why.find("more than the limit of 16 bytes") != std::string::npos);
    auto scanned = scan_includes("#include \"/proc/self/status\"\n", {}, {});
    REQUIRE(scanned.files.size() == 1);
    CHECK(scanned.files.front().state.find(":0") == std::string::npos);  // "<hash>:<size>", not size 0
  }
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

// The dynamic loader's cache (platform/ld_cache.hpp): the search's step between LD_LIBRARY_PATH and
// the system directories, read as hostile input.
namespace {

using fatpack::detail::os::ld_cache_status;

struct ld_entry {
  std::int32_t flags;
  std::string key, value;
  std::uint64_t hwcap = 0;
};
#if defined(__aarch64__)
constexpr std::int32_t k_host_abi = 0x0a03;  // FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64
const char* const k_host_abi_name = "libc6,AArch64";  // as ldconfig -p writes it
#else
constexpr std::int32_t k_host_abi = 0x0303;  // FLAG_ELF_LIBC6 | FLAG_X8664_LIB64
const char* const k_host_abi_name = "libc6,x86-64";
#endif

template <class T>
void put(std::string& out, std::size_t at, T v) {
  std::memcpy(&out[at], &v, sizeof v);
}

// A cache as glibc's ldconfig writes it: the new format alone, or behind an old-format table of
// `old_entries` (whose contents nobody reads).
std::string make_ld_cache(const std::vector<ld_entry>& entries, std::uint32_t old_entries = 0, bool with_old = false) {
  std::string out;
  if (with_old) {
    out.assign(16 + std::size_t(old_entries) * 12, '\0');
    std::memcpy(&out[0], "ld.so-1.7.0", 11);
    put<std::uint32_t>(out, 12, old_entries);
    out.resize((out.size() + 7) & ~std::size_t(7), '\0');
  }
  const std::size_t base = out.size();
  const std::size_t strings_begin = 48 + entries.size() * 24;
  std::string strings;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> offsets;
  for (const auto& e : entries) {
    const auto key = static_cast<std::uint32_t>(strings_begin + strings.size());
    strings += e.key + '\0';
    const auto value = static_cast<std::uint32_t>(strings_begin + strings.size());
    strings += e.value + '\0';
    offsets.emplace_back(key, value);
  }
  out.resize(base + strings_begin, '\0');
  std::memcpy(&out[base], "glibc-ld.so.cache1.1", 20);
  put<std::uint32_t>(out, base + 20, static_cast<std::uint32_t>(entries.size()));
  put<std::uint32_t>(out, base + 24, static_cast<std::uint32_t>(strings.size()));
  out[base + 28] = 2;  // little-endian
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::size_t at = base + 48 + i * 24;
    put<std::int32_t>(out, at, entries[i].flags);
    put<std::uint32_t>(out, at + 4, offsets[i].first);
    put<std::uint32_t>(out, at + 8, offsets[i].second);
    put<std::uint64_t>(out, at + 16, entries[i].hwcap);
  }
  return out + strings;
}

// Looks up in a heap copy of exactly the cache's size, so that ASan sees a read one byte past it.
fatpack::detail::os::ld_cache_answer lookup_exact(const std::string& bytes, std::string_view name) {
  std::unique_ptr<char[]> copy(new char[bytes.size() + 1]);  // + 1: never 0 bytes; the extra one is not in the view
  std::memcpy(copy.get(), bytes.data(), bytes.size());
  return fatpack::detail::os::ld_cache_lookup(std::string_view(copy.get(), bytes.size()), name);
}

const std::vector<ld_entry> k_foo_entries = {
    {0x0003, "libfoo.so.1", "/lib32/libfoo.so.1"},                                   // another ABI (i386)
    {k_host_abi, "libfoo.so.1", "/opt/v3/libfoo.so.1", (std::uint64_t(1) << 62) | 1},  // a glibc-hwcaps subdirectory
    {k_host_abi, "libbar.so.2", "/opt/a/libbar.so.2"},
    {k_host_abi, "libfoo.so.1", "/opt/a/libfoo.so.1"},                               // the one
    {k_host_abi, "libfoo.so.1", "/opt/b/libfoo.so.1"},                               // later: not taken
};

// Sets (or with nullptr, removes) an environment variable for a scope, then puts the old value back.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~scoped_env() {
    if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace

TEST_CASE("ld.so.cache: this machine's cache parses and agrees with ldconfig -p") {
  const std::string real = fatpack::detail::os::k_ld_cache_path;
  struct stat st{};
  if (::stat(real.c_str(), &st) != 0) {
    MESSAGE("no " << real << " on this machine: the real cache is not checked");
    return;
  }
  auto libc = fatpack::detail::os::ld_cache_find(real, "libc.so.6");
  INFO(libc.why);
  REQUIRE(libc.status == ld_cache_status::found);
  // The C library this test runs with is the file the cache names (the loader found it the same way).
  // Asked of the loader by name (dladdr of a libc function names libasan under ASan, which intercepts it).
  void* handle = ::dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(handle);
  struct link_map* lm = nullptr;
  REQUIRE(::dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0);
  REQUIRE(lm);
  char* mine = ::realpath(lm->l_name, nullptr);
  ::dlclose(handle);
  char* listed = ::realpath(libc.path.c_str(), nullptr);
  REQUIRE(mine);
  REQUIRE(listed);
  CHECK(std::string(mine) == std::string(listed));
  std::free(mine);
  std::free(listed);
  CHECK(fatpack::detail::os::ld_cache_find(real, "libfatpack-no-such-library.so.0").status == ld_cache_status::not_listed);

  // glibc's own reading: the first line of `ldconfig -p` for the name and this ABI, without a hwcap.
  std::string ldconfig;
  for (const char* p : {"/sbin/ldconfig", "/usr/sbin/ldconfig"})
    if (::access(p, X_OK) == 0) {
      ldconfig = p;
      break;
    }
  if (ldconfig.empty()) return;
  auto listing = run_child({ldconfig, "-p"}, {});
  REQUIRE(listing.status == 0);
  int compared = 0;
  for (const std::string name : {"libc.so.6", "libm.so.6", "libnvrtc.so.13", "libstdc++.so.6", "libz.so.1"}) {
    const std::string head = "\t" + name + " (" + k_host_abi_name + ") => ";
    const std::size_t at = listing.out.find(head);
    auto ours = fatpack::detail::os::ld_cache_find(real, name);
    INFO(name << ": " << ours.why);
    if (at == std::string::npos) {
      CHECK(ours.status == ld_cache_status::not_listed);
      continue;
    }
    const std::size_t end = listing.out.find('\n', at);
    CHECK(ours.status == ld_cache_status::found);
    CHECK(ours.path == listing.out.substr(at + head.size(), end - at - head.size()));
    ++compared;
  }
  CHECK(compared >= 1);  // libc.so.6 at least
}

TEST_CASE("ld.so.cache: a crafted cache resolves a name to the first entry of this ABI without hwcap") {
  for (const bool with_old : {false, true}) {
    INFO("behind an old-format table: " << with_old);
    const std::string bytes = make_ld_cache(k_foo_entries, 3, with_old);
    auto foo = lookup_exact(bytes, "libfoo.so.1");
    INFO(foo.why);
    CHECK(foo.status == ld_cache_status::found);
    CHECK(foo.path == "/opt/a/libfoo.so.1");
    CHECK(lookup_exact(bytes, "libbar.so.2").path == "/opt/a/libbar.so.2");
    for (const char* absent : {"libfoo.so", "libfoo.so.1x", "libfoo.so.", "", "/opt/a/libfoo.so.1"})
      CHECK(lookup_exact(bytes, absent).status == ld_cache_status::not_listed);
    CHECK(lookup_exact(bytes, std::string_view("libfoo.so.1\0", 12)).status == ld_cache_status::not_listed);
    // The same through a file.
    const std::string d = case_dir(with_old ? "ld_cache_old" : "ld_cache_new");
    write_text(d + "/ld.so.cache", bytes);
    CHECK(fatpack::detail::os::ld_cache_find(d + "/ld.so.cache", "libfoo.so.1").path == "/opt/a/libfoo.so.1");
  }
  // Only another ABI's entry, or only a hwcap one: not listed.
  CHECK(lookup_exact(make_ld_cache({k_foo_entries[0], k_foo_entries[1]}), "libfoo.so.1").status == ld_cache_status::not_listed);
  // An empty cache is well formed.
  CHECK(lookup_exact(make_ld_cache({}), "libfoo.so.1").status == ld_cache_status::not_listed);
  // No file, a directory: absent.
  const std::string d = case_dir("ld_cache_absent");
  CHECK(fatpack::detail::os::ld_cache_find(d + "/none", "libfoo.so.1").status == ld_cache_status::absent);
  CHECK(fatpack::detail::os::ld_cache_find(d, "libfoo.so.1").status == ld_cache_status::absent);
}

TEST_CASE("ld.so.cache: damaged caches are rejected whole, without reading outside the file") {
  const auto malformed = [](const std::string& bytes, const char* what) {
    auto a = lookup_exact(bytes, "libfoo.so.1");
    INFO(what << ": " << a.why);
    CHECK(a.status == ld_cache_status::malformed);
    CHECK(a.path.empty());
    CHECK(a.why.rfind("malformed: ", 0) == 0);
  };
  for (const bool with_old : {false, true}) {
    INFO("behind an old-format table: " << with_old);
    const std::string good = make_ld_cache(k_foo_entries, 2, with_old);
    const std::size_t base = with_old ? 16 + 2 * 12 : 0;  // 40: already a multiple of 8
    REQUIRE(lookup_exact(good, "libfoo.so.1").status == ld_cache_status::found);
    // Every truncation.
    for (std::size_t n = 0; n < good.size(); ++n) {
      auto a = lookup_exact(good.substr(0, n), "libfoo.so.1");
      INFO("truncated to " << n << ": " << a.why);
      CHECK(a.status == ld_cache_status::malformed);
    }
    std::string bad = good;
    bad[base + 3] ^= 1;
    malformed(bad, "new magic");
    bad = good;
    bad[base + 19] = '0';  // version 1.0
    malformed(bad, "version");
    for (const std::uint32_t count : {0xffffffffu, 0x0aaaaaaau, std::uint32_t(k_foo_entries.size() + 1)}) {
      bad = good;
      put<std::uint32_t>(bad, base + 20, count);
      malformed(bad, "entry count");
    }
    bad = good;
    put<std::uint32_t>(bad, base + 24, 0xffffffffu);
    malformed(bad, "string table size");
    bad = good;
    bad[bad.size() - 1] = 'x';  // the table's last string loses its NUL
    malformed(bad, "missing NUL");
    for (const std::uint8_t endian : {1, 3}) {
      bad = good;
      bad[base + 28] = static_cast<char>(endian);
      malformed(bad, "invalid or big-endian");
    }
    // Offsets outside the string table, in the last entry (after the match: every entry is checked).
    const std::size_t last = base + 48 + (k_foo_entries.size() - 1) * 24;
    for (const std::size_t field : {std::size_t(4), std::size_t(8)})
      for (const std::uint32_t offset : {0u, 47u, 0xffffffffu, static_cast<std::uint32_t>(good.size() - base)}) {
        bad = good;
        put<std::uint32_t>(bad, last + field, offset);
        malformed(bad, field == 4 ? "key offset" : "value offset");
      }
  }
  // An old-format table that runs past the end, or an old format alone.
  std::string old_only(16, '\0');
  std::memcpy(&old_only[0], "ld.so-1.7.0", 11);
  malformed(old_only, "old format only");
  std::string old_huge = make_ld_cache(k_foo_entries, 0, true);
  put<std::uint32_t>(old_huge, 12, 0xffffffffu);
  malformed(old_huge, "old table count");
  malformed("\x7f" "ELF and more bytes than a header's worth, 48 of them at least.........", "wrong magic");
  // The matching entry's path: relative, empty, or 4 KiB and more.
  malformed(make_ld_cache({{k_host_abi, "libfoo.so.1", "libfoo.so.1"}}), "relative path");
  malformed(make_ld_cache({{k_host_abi, "libfoo.so.1", ""}}), "empty path");
  malformed(make_ld_cache({{k_host_abi, "libfoo.so.1", "/" + std::string(4095, 'p')}}), "long path");
  CHECK(lookup_exact(make_ld_cache({{k_host_abi, "libfoo.so.1", "/" + std::string(4094, 'p')}}), "libfoo.so.1").status ==
        ld_cache_status::found);
  // Over 16 MiB: refused before it is read.
  const std::string d = case_dir("ld_cache_big");
  const std::string big = d + "/ld.so.cache";
  write_text(big, make_ld_cache(k_foo_entries));
  REQUIRE(::truncate(big.c_str(), off_t(fatpack::detail::os::k_max_ld_cache_bytes) + 1) == 0);
  auto a = fatpack::detail::os::ld_cache_find(big, "libfoo.so.1");
  CHECK(a.status == ld_cache_status::malformed);
  CHECK(a.why.find("larger than 16 MiB") != std::string::npos);
}

TEST_CASE("locate NVRTC: LD_LIBRARY_PATH, then the loader's cache, then the directories; a damaged cache is skipped") {
  const std::string d = case_dir("locate_order");
  ::mkdir((d + "/cached").c_str(), 0700);
  ::mkdir((d + "/env").c_str(), 0700);
  const std::string cached = d + "/cached/libnvrtc.so.13", in_env = d + "/env/libnvrtc.so.13";
  REQUIRE(::symlink(NVRTC_PATH, cached.c_str()) == 0);
  REQUIRE(::symlink(NVRTC_PATH, in_env.c_str()) == 0);
  write_text(d + "/ld.so.cache", make_ld_cache({{k_host_abi, "libnvrtc.so.13", cached}}));
  std::string damaged = make_ld_cache({{k_host_abi, "libnvrtc.so.13", cached}});
  damaged.pop_back();  // the string table runs past the end
  write_text(d + "/damaged.cache", damaged);
  write_text(d + "/other.cache", make_ld_cache({{k_host_abi, "libnvrtc.so.13", d + "/cached/gone.so"}}));

  scoped_env no_override("FATPACK_LIBNVRTC", nullptr);
  scoped_env no_path("LD_LIBRARY_PATH", nullptr);
  // The cache comes before the system and CUDA directories (which hold the toolkit's NVRTC here).
  auto loc = fatpack::detail::locate_nvrtc(d + "/ld.so.cache");
  REQUIRE_MESSAGE(loc, loc.error().message);
  CHECK(loc->path == cached);
  CHECK(loc->identity.rfind("libnvrtc.so.13 build-id ", 0) == 0);
  {
    scoped_env bare("FATPACK_LIBNVRTC", "libnvrtc.so.13");  // a bare name: the same search
    auto by_name = fatpack::detail::locate_nvrtc(d + "/ld.so.cache");
    REQUIRE_MESSAGE(by_name, by_name.error().message);
    CHECK(by_name->path == cached);
  }
  {
    scoped_env path("LD_LIBRARY_PATH", (d + "/none:" + d + "/env").c_str());  // LD_LIBRARY_PATH first
    auto env = fatpack::detail::locate_nvrtc(d + "/ld.so.cache");
    REQUIRE_MESSAGE(env, env.error().message);
    CHECK(env->path == in_env);
  }
  // A damaged cache is skipped with a debug line.
  std::vector<std::string> lines;
  const fatpack::log_level level = fatpack::get_log_level();
  fatpack::set_log_level(fatpack::log_level::debug);
  fatpack::set_log_callback([&lines](fatpack::log_level, std::string_view line) { lines.emplace_back(line); });
  (void)fatpack::detail::locate_nvrtc(d + "/damaged.cache");
  fatpack::set_log_callback(nullptr);
  fatpack::set_log_level(level);
  bool logged = false;
  for (const auto& l : lines) logged |= l.find("the loader's cache is not used: " + d + "/damaged.cache: malformed: ") != std::string::npos;
  CHECK(logged);
  // A damaged cache, or one naming a file that is not there: the search goes on past it.
  for (const char* cache : {"/damaged.cache", "/other.cache", "/no-such.cache"}) {
    INFO(cache);
    auto past = fatpack::detail::locate_nvrtc(d + cache);
    if (past) {
      CHECK(past->path.rfind(d, 0) != 0);  // found in a system or CUDA directory, not through the cache
    } else {
      CHECK(past.error().code == fatpack::errc::no_driver);
      CHECK(past.error().message.find(d + cache) != std::string::npos);
      if (std::string(cache) == "/damaged.cache") CHECK(past.error().message.find("(ignored") != std::string::npos);
      CHECK(past.error().message.find("install NVRTC") != std::string::npos);  // no variable chose it
    }
  }
  // No cache at all (""): not listed in the message.
  auto none = fatpack::detail::locate_nvrtc("");
  if (!none) CHECK(none.error().message.find("ld.so.cache") == std::string::npos);
}
