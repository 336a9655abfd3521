// A child process for the NVRTC tests (nvrtc_test.cpp): compiles one program with fatpack::compile and
// prints what happened, one line per device, then whether NVRTC is mapped into this process
// (/proc/self/maps), so the test can tell that a cache hit never loaded it.
//
//   nvrtc_probe SOURCE_FILE [--include DIR] [--header NAME=FILE] [--name-expr EXPR] [--kernel QUERY]
//               [--option OPT] [--name PROGRAM_NAME] [--cwd DIR] [--all-devices] [--no-cache] [--c-api] [--twice]
// --twice: compiles again in the same process after the first compile (one more result line);
// --then-env NAME=VALUE / --then-option OPT: set before that second compile / added to its options.
// --c-api: through fatpack_compile (fatpack.h), printing "c_path=<id>" and "c_kernel=<ok|message>".
// Output: "device=<n> path=<cache hit|NVRTC SASS|NVRTC PTX + JIT> target=<t> stored=<0|1> kernel=<ok|error text>"
//         then "reason=<why>" and "compiler=<NVRTC identity>",
//         or "error=<errc name>: <message>" and "log=<NVRTC log>"; then "threads=<n> hw=<m>" (this
//         process's threads after the compile, and the processor count the C++ library reports: a
//         hit must start no thread), "entry_mappings=<n>" (cache entry files mapped while the
//         results live); last line "nvrtc_loaded=<0|1>".
// Exit status 0 when every device compiled and every --kernel was found, else 1.
#include "fatpack/compile.hpp"
#include "fatpack/fatpack.h"

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include <unistd.h>

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

int thread_count() {
  const std::string status = slurp("/proc/self/status");
  const std::size_t p = status.find("\nThreads:");
  return p == std::string::npos ? -1 : std::atoi(status.c_str() + p + 9);
}

bool nvrtc_mapped() {
  return slurp("/proc/self/maps").find("libnvrtc") != std::string::npos;
}

// Mappings of cache entry files (*.fpc) while the compiled libraries live: a hit's large entry is
// mapped, and the library's package is made around that mapping (no copy).
int entry_mappings() {
  const std::string maps = slurp("/proc/self/maps");
  int n = 0;
  for (std::size_t p = maps.find(".fpc"); p != std::string::npos; p = maps.find(".fpc", p + 1)) ++n;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: nvrtc_probe SOURCE_FILE [options]\n";
    return 2;
  }
  fatpack::compile_request req;
  req.source = slurp(argv[1]);
  req.name = "probe.cu";
  fatpack::compile_options opts;
  std::vector<std::string> kernels;
  bool all_devices = false, c_api = false, twice = false;
  std::vector<std::string> then_env, then_options;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--include") req.include_paths.push_back(v), ++i;
    else if (a == "--header") {
      const auto eq = v.find('=');
      req.headers.push_back({v.substr(0, eq), slurp(v.substr(eq + 1))});
      ++i;
    } else if (a == "--name-expr") req.name_expressions.push_back(v), ++i;
    else if (a == "--kernel") kernels.push_back(v), ++i;
    else if (a == "--option") req.options.push_back(v), ++i;
    else if (a == "--name") req.name = v, ++i;
    else if (a == "--cwd") {
      if (::chdir(v.c_str()) != 0) return 2;
      ++i;
    }
    else if (a == "--all-devices") all_devices = true;
    else if (a == "--no-cache") opts.use_cache = false;
    else if (a == "--c-api") c_api = true;
    else if (a == "--twice") twice = true;
    else if (a == "--then-env") then_env.push_back(v), ++i;
    else if (a == "--then-option") then_options.push_back(v), ++i;
  }
  if (c_api) {
    std::vector<const char*> incs, names, hnames, htexts;
    for (const auto& s : req.include_paths) incs.push_back(s.c_str());
    for (const auto& s : req.name_expressions) names.push_back(s.c_str());
    for (const auto& h : req.headers) hnames.push_back(h.name.c_str()), htexts.push_back(h.contents.c_str());
    fatpack_compile_args args = FATPACK_COMPILE_ARGS_INIT;
    args.source = req.source.c_str();
    args.name = req.name.c_str();
    args.include_paths = incs.data();
    args.num_include_paths = incs.size();
    args.name_expressions = names.data();
    args.num_name_expressions = names.size();
    args.header_names = hnames.data();
    args.header_contents = htexts.data();
    args.num_headers = hnames.size();
    fatpack_program* p = nullptr;
    fatpack_status st = fatpack_compile(&args, &p);
    bool good = st == FATPACK_OK;
    if (!good) std::cout << "error=" << fatpack_status_name(st) << ": " << fatpack_last_error() << "\n";
    else std::cout << "c_path=" << fatpack_program_path(p) << "\n" << fatpack_program_report(p);
    for (const auto& k : kernels) {
      struct CUkern_st* kern = nullptr;
      const bool found = p && fatpack_program_kernel(p, k.c_str(), &kern) == FATPACK_OK && kern;
      std::cout << "c_kernel=" << (found ? std::string("ok") : std::string(fatpack_last_error())) << "\n";
      good = good && found;
    }
    fatpack_program_release(p);
    std::cout << "nvrtc_loaded=" << nvrtc_mapped() << "\n";
    return good ? 0 : 1;
  }
  std::vector<fatpack::result<fatpack::compiled>> results;
  if (all_devices) results = fatpack::compile_for_devices(req);
  else results.push_back(fatpack::compile(req, opts));
  if (twice) {
    for (const auto& kv : then_env) {
      const auto eq = kv.find('=');
      ::setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    }
    req.options.insert(req.options.end(), then_options.begin(), then_options.end());
    results.push_back(fatpack::compile(req, opts));
  }
  bool ok = true;
  for (auto& r : results) {
    if (!r) {
      ok = false;
      std::cout << "error=" << fatpack::errc_name(r.error().code) << ": " << r.error().message << "\n";
      if (!r.error().log.empty()) std::cout << "log=" << r.error().log << "\n";
      continue;
    }
    const fatpack::compile_report& rep = r->report;
    std::cout << "device=" << rep.device << " path=" << fatpack::compile_path_name(rep.path) << " target=" << rep.target
              << " stored=" << rep.stored << " deps=" << rep.dependencies.size();
    for (const auto& k : kernels) {
      auto found = r->kernel(k);
      std::cout << " kernel=" << (found ? std::string("ok") : found.error().message);
      ok = ok && found;
    }
    std::cout << "\nreason=" << rep.reason << "\ncompiler=" << rep.compiler << "\n";
    if (!rep.not_cached.empty()) std::cout << "not_cached=" << rep.not_cached << "\n";
    // The timings' parts: each measured (a hit and a miss both locate NVRTC, scan, look up and load)
    // and together no more than the whole.
    const double parts = rep.locate_ms + rep.scan_ms + rep.lookup_ms + rep.register_ms + rep.load_ms;
    const bool measured = rep.locate_ms > 0 && rep.scan_ms > 0 && rep.register_ms > 0 && rep.load_ms > 0 &&
                          (rep.lookup_ms > 0 || rep.cache_key.empty());  // looked up where cached
    std::cout << "phases=" << (measured && parts <= rep.total_ms + 1e-6 ? "ok" : "wrong") << " total_ms=" << rep.total_ms
              << " parts_ms=" << parts << "\n";
  }
  std::cout << "entry_mappings=" << entry_mappings() << "\n";
  std::cout << "threads=" << thread_count() << " hw=" << std::thread::hardware_concurrency() << "\n";
  std::cout << "nvrtc_loaded=" << nvrtc_mapped() << "\n";
  return ok ? 0 : 1;
}
