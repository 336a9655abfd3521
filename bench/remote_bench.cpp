// fatpack_remote_bench: the fleet cache on loopback (docs/cache.md §12, docs/benchmarks.md "Fleet
// cache on loopback (CPU)"). Not a test.
//
//   fatpack_remote_bench [--cubin FILE] [--ptx FILE] [--runs N] [--ptxas PROGRAM]
//
// One real cubin (default: the suite's mid.sm_90.cubin, bench/make_suite_inputs.sh) is stored under
// a synthetic JIT key in a local cache directory and uploaded, signed, into a real nginx (WebDAV
// PUT) and a real redis-server on loopback, started here and stopped by their PIDs. Then every case
// runs in a fresh process (this program again, with --child CASE), interleaved round-robin, and
// the medians and 90th percentiles are printed as a markdown table:
//   local  the local cache: disk_cache over the directory, find(key)
//   http   the remote layer over an empty fresh local directory and the nginx store: a remote hit
//          (libcurl dlopen-ed at first use, connect, GET, envelope + signature + entry checks)
//   redis  the same over redis-server (hiredis dlopen-ed at first use, connect, MGET)
//   ptxas  `ptxas -arch=sm_XX` of the cubin's PTX (--ptx, default the suite's mid.compute_90.ptx):
//          a stand-in for the driver's JIT on this CPU machine (the GPU suite measures the real one)
// Each child then loads the bytes with cuModuleLoadData and looks up every kernel, through the
// driver FATPACK_LIBCUDA names (the build's fake driver unless set): the same work in every case.
// Times: "get" is the child's time from its first line of main to the bytes in memory (opening the
// cache or the store included: a fresh process pays it); "process" is the parent's wall time from
// fork to exit (exec, the load, and the exit, where a remote hit's local copy is flushed).
#include "cache/directory.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry.hpp"
#include "cache/key.hpp"
#include "cache/store.hpp"
#include "platform/device.hpp"
#include "platform/driver.hpp"
#include "remote/remote_cache.hpp"
#include "remote/remote_config.hpp"
#include "remote/remote_store.hpp"

#include "fatpack/core/input.hpp"

#include "servers.hpp"
#include "redis_server.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace fatpack::detail;
using clk = std::chrono::steady_clock;
namespace rt = fatpack::test::remote;

namespace {

const clk::time_point process_start = clk::now();

double us_since(clk::time_point t0) { return std::chrono::duration<double, std::micro>(clk::now() - t0).count(); }

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The synthetic key every process agrees on: no PTX of that hash exists, the entry is what counts.
jit_key bench_key(std::uint32_t arch) {
  jit_key k;
  k.ptx_xxh3 = 0x72656d6f74656265ull;  // "remotebe"
  k.ptx_size = 1820669;
  k.ptx_target = fatpack::core::target::parse("compute_90").value();
  k.ptx_isa = fatpack::core::ptx_isa{9, 0};
  k.target_arch = arch;
  k.driver_version = 13000;
  return k;
}

std::shared_ptr<cache::disk_cache> local_cache(const std::string& dir) {
  return cache::disk_cache::over(cache::cache_dir::open(dir, true, 0, "user", false));
}

remote::remote_config config_for(const std::string& url, const std::string& key_file, bool read_write) {
  remote::remote_config c;
  c.store.url = url;
  c.read_write = read_write;
  c.key_file = key_file;
  if (std::string err = remote::read_key_file(key_file, c.key); !err.empty()) c.problems.push_back(err);
  return c;
}

// cuModuleLoadData + cuModuleGetFunction of every kernel, microseconds; -1 without a driver or on failure.
double load_touch(const std::vector<std::uint8_t>& cubin) {
  const auto& r = load_devices();
  if (!r || (*r)->devices.empty()) {
    std::fprintf(stderr, "no driver: %s\n", r ? "no device" : r.error().message.c_str());
    return -1;
  }
  const device_set& ds = **r;
  auto ctx = primary_context::retain(*ds.drv, ds.devices[0]);
  if (!ctx) {
    std::fprintf(stderr, "no context: %s\n", ctx.error().message.c_str());
    return -1;
  }
  scoped_context current(*ds.drv, ctx->get());
  auto info = fatpack::core::parse_cubin(fatpack::core::byte_span(cubin), "cubin");
  const auto t0 = clk::now();
  CUmodule m = nullptr;
  if (CUresult e = ds.drv->cuModuleLoadDataEx(&m, cubin.data(), 0, nullptr, nullptr); e != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuModuleLoadDataEx: CUresult %d\n", static_cast<int>(e));
    return -1;
  }
  if (info)
    for (const auto& k : info->kernels) {
      CUfunction f = nullptr;
      if (ds.drv->cuModuleGetFunction(&f, m, k.c_str()) != CUDA_SUCCESS) {
        std::fprintf(stderr, "cuModuleGetFunction %s failed\n", k.c_str());
        return -1;
      }
    }
  const double us = us_since(t0);
  ds.drv->cuModuleUnload(m);
  return us;
}

// ---- child side ------------------------------------------------------------------------------

struct child_args {
  std::string which, dir, url, key_file, ptx, ptxas, out;
  std::uint32_t arch = 90;
};

// Prints "get_us=.. load_us=.. bytes=.. remote_hits=..": one line the parent reads.
int child_main(const child_args& a) {
  std::vector<std::uint8_t> bytes;
  double get_us = 0, copy_us = 0;
  std::shared_ptr<remote::remote_cache> remote_layer;
  const jit_key key = bench_key(a.arch);
  if (a.which == "local") {
    auto c = local_cache(a.dir);
    auto hit = c->find(key, false);
    get_us = us_since(process_start);
    if (hit) bytes = std::move(hit->sass).take();
  } else if (a.which == "http" || a.which == "redis") {
    // What the runtime builds when FATPACK_CACHE_REMOTE is set (with_remote_from_env): the layer over
    // the (empty) local cache, the store opened at first use.
    auto layer = remote::remote_cache::create(local_cache(a.dir), config_for(a.url, a.key_file, false),
                                              cache::format_dir(a.dir));
    auto hit = layer->find(key, false);
    get_us = us_since(process_start);
    if (hit) bytes = std::move(hit->sass).take();
    remote_layer = layer;
  } else if (a.which == "ptxas") {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const std::string arch = "-arch=sm_" + std::to_string(a.arch);
      ::execlp(a.ptxas.c_str(), a.ptxas.c_str(), arch.c_str(), a.ptx.c_str(), "-o", a.out.c_str(), (char*)nullptr);
      ::_exit(127);
    }
    int st = 0;
    if (pid < 0 || ::waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      std::fprintf(stderr, "ptxas failed\n");
      return 1;
    }
    bytes = read_bytes(a.out);
    get_us = us_since(process_start);
  } else {
    std::fprintf(stderr, "unknown case %s\n", a.which.c_str());
    return 2;
  }
  const double load_us = bytes.empty() ? -1 : load_touch(bytes);
  if (remote_layer) {
    // What is left of the hit's local copy, written in the background during the load (the runtime
    // does not wait for it; an exiting process does, bounded).
    const auto t0 = clk::now();
    remote_layer->flush(-1);
    copy_us = us_since(t0);
  }
  std::printf("get_us=%.1f load_us=%.1f copy_us=%.1f bytes=%zu remote_hits=%llu\n", get_us, load_us, copy_us, bytes.size(),
              static_cast<unsigned long long>(remote::counters().hits.load()));
  return bytes.empty() ? 1 : 0;
}

// ---- parent side -----------------------------------------------------------------------------

struct sample {
  double get_us = -1, load_us = -1, copy_us = -1, process_ms = -1;
  std::size_t bytes = 0;
  long remote_hits = -1;
};

double value_of(const std::string& line, const std::string& name) {
  auto p = line.find(name + "=");
  return p == std::string::npos ? -1 : std::atof(line.c_str() + p + name.size() + 1);
}

sample run_child(const std::vector<std::string>& args) {
  sample s;
  int fds[2];
  if (::pipe(fds) != 0) return s;
  const auto t0 = clk::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv;
    for (const auto& x : args) argv.push_back(const_cast<char*>(x.c_str()));
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  s.process_ms = us_since(t0) / 1000;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::fprintf(stderr, "child %s failed: %s\n", args.at(2).c_str(), out.c_str());
    s.process_ms = -1;
    return s;
  }
  s.get_us = value_of(out, "get_us");
  s.load_us = value_of(out, "load_us");
  s.copy_us = value_of(out, "copy_us");
  s.bytes = static_cast<std::size_t>(value_of(out, "bytes"));
  s.remote_hits = static_cast<long>(value_of(out, "remote_hits"));
  return s;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
}

std::string fresh_dir(const std::string& parent, const std::string& name) {
  const std::string d = parent + "/" + name;
  ::mkdir(d.c_str(), 0700);
  return d;
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--cubin FILE] [--ptx FILE] [--runs N] [--ptxas PROGRAM]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cubin_path = FATPACK_BENCH_SUITE_INPUTS "/mid.sm_90.cubin";
  std::string ptx_path = FATPACK_BENCH_SUITE_INPUTS ".work/mid.compute_90.ptx";
  std::string ptxas = "ptxas";
  int runs = 15;
  child_args child;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--cubin") cubin_path = next();
    else if (a == "--ptx") ptx_path = next();
    else if (a == "--runs") runs = std::atoi(next().c_str());
    else if (a == "--ptxas") ptxas = next();
    else if (a == "--child") child.which = next();
    else if (a == "--dir") child.dir = next();
    else if (a == "--url") child.url = next();
    else if (a == "--key-file") child.key_file = next();
    else if (a == "--arch") child.arch = static_cast<std::uint32_t>(std::atoi(next().c_str()));
    else if (a == "--out") child.out = next();
    else return usage(argv[0]);
  }
  if (!child.which.empty()) {
    child.ptx = ptx_path;
    child.ptxas = ptxas;
    return child_main(child);
  }
  if (runs < 1 || runs > 1000) return usage(argv[0]);

  // The driver of the children's loads: the one the caller names, else the build's fake driver.
  if (!std::getenv("FATPACK_LIBCUDA")) {
    ::setenv("FATPACK_LIBCUDA", FAKECUDA_PATH, 1);
    ::setenv("FAKECUDA_DEVICES", "90", 0);
  }
  for (const char* v : {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) ::unsetenv(v);

  const auto cubin = read_bytes(cubin_path);
  const auto sm = cubin.empty() ? std::nullopt : cache::cubin_sm_word(fatpack::core::byte_span(cubin));
  if (!sm) {
    std::fprintf(stderr, "%s: not a cubin (make one with bench/make_suite_inputs.sh, or pass --cubin)\n", cubin_path.c_str());
    return 1;
  }
  const std::uint32_t arch = cache::sm_arch(*sm);
  const jit_key key = bench_key(arch);
  const bool have_ptx = !read_bytes(ptx_path).empty();

  rt::temp_dir work;
  const std::string key_file = work.path() + "/fleet.key";
  {
    std::ofstream(key_file) << "remote-bench-signing-key-0123456789abcdef0123456789";
    ::chmod(key_file.c_str(), 0600);
  }
  // The local cache of case (a).
  const std::string local_dir = fresh_dir(work.path(), "local");
  local_cache(local_dir)->store(key, fatpack::core::byte_span(cubin));
  if (!local_cache(local_dir)->find(key, false)) {
    std::fprintf(stderr, "the local store of the entry failed\n");
    return 1;
  }

  // The remotes, each given the entry by the remote layer's own upload (signed, publish-if-absent).
  std::map<std::string, std::string> urls;
  std::vector<std::string> notes;
  std::unique_ptr<rt::nginx_server> nginx;
  if (rt::nginx_server::executable().empty()) notes.push_back("HTTP: skipped, nginx not installed (nginx-light)");
  else {
    nginx = std::make_unique<rt::nginx_server>();
    urls["http"] = nginx->url();
  }
  std::unique_ptr<fatpack_test::redis_server> redis;
  if (!fatpack_test::redis_server::installed()) notes.push_back("Redis: skipped, redis-server not installed");
  else {
    redis = std::make_unique<fatpack_test::redis_server>();
    urls["redis"] = redis->url();
  }
  for (auto it = urls.begin(); it != urls.end();) {
    std::string why;
    auto probe = remote::open_store(remote::store_settings{it->second}, why);
    if (!probe) {
      notes.push_back(it->first + ": skipped, " + why);
      it = urls.erase(it);
      continue;
    }
    auto layer = remote::remote_cache::over(local_cache(local_dir), config_for(it->second, key_file, true),
                                            std::move(probe), "");
    const auto before = remote::counters().uploads.load();
    layer->upload(key, fatpack::core::byte_span(cubin));
    if (!layer->flush(10000) || remote::counters().uploads.load() != before + 1) {
      notes.push_back(it->first + ": skipped, the upload failed");
      it = urls.erase(it);
      continue;
    }
    ++it;
  }

  std::vector<std::string> cases = {"local"};
  for (const auto& u : urls) cases.push_back(u.first);
  if (have_ptx) cases.push_back("ptxas");
  else notes.push_back("ptxas: skipped, no PTX at " + ptx_path + " (pass --ptx)");

  std::printf("cubin %s: %zu bytes, sm_%u; %d runs per case, round-robin, each a fresh process\n", cubin_path.c_str(),
              cubin.size(), arch, runs);
  for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
  const std::string self = "/proc/self/exe";
  std::map<std::string, std::vector<sample>> samples;
  for (int r = 0; r < runs; ++r) {
    for (const auto& c : cases) {
      std::vector<std::string> args = {self, "--child", c, "--arch", std::to_string(arch), "--key-file", key_file};
      if (c == "local") args.insert(args.end(), {"--dir", local_dir});
      else if (c == "ptxas") args.insert(args.end(), {"--ptx", ptx_path, "--ptxas", ptxas, "--out", work.path() + "/ptxas.cubin"});
      else args.insert(args.end(), {"--dir", fresh_dir(work.path(), c + std::to_string(r)), "--url", urls[c]});
      sample s = run_child(args);
      const bool remote_case = c == "http" || c == "redis";
      if (s.process_ms < 0 || (c != "ptxas" && s.bytes != cubin.size()) || (remote_case && s.remote_hits != 1)) {
        std::fprintf(stderr, "case %s run %d: wrong result (bytes %zu, remote hits %ld)\n", c.c_str(), r, s.bytes,
                     s.remote_hits);
        return 1;
      }
      samples[c].push_back(s);
    }
  }

  const std::map<std::string, std::string> label = {
      {"local", "(a) local hit (disk_cache, mapped index + entry)"},
      {"http", "(b) remote hit, HTTP (nginx), empty local cache"},
      {"redis", "(c) remote hit, Redis, empty local cache"},
      {"ptxas", "(d) JIT stand-in: ptxas -arch=sm_" + std::to_string(arch) + " of the PTX"}};
  std::printf("\n| case | get the bytes: median | p90 | load (cuModuleLoadData + every kernel): median | "
              "then the local copy: median | process wall: median | p90 |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& c : cases) {
    std::vector<double> get, load, copy, proc;
    for (const auto& s : samples[c]) {
      copy.push_back(s.copy_us / 1000);
      get.push_back(s.get_us / 1000);
      load.push_back(s.load_us);
      proc.push_back(s.process_ms);
    }
    const bool remote_case = c == "http" || c == "redis";
    const std::string copied = remote_case ? std::to_string(quantile(copy, 0.5)).substr(0, 5) + " ms" : "-";
    std::printf("| %s | %.2f ms | %.2f ms | %.0f us | %s | %.1f ms | %.1f ms |\n", label.at(c).c_str(), quantile(get, 0.5),
                quantile(get, 0.9), quantile(load, 0.5), copied.c_str(), quantile(proc, 0.5), quantile(proc, 0.9));
  }
  std::printf("\ndriver of the loads: %s\n", std::getenv("FATPACK_LIBCUDA"));
  return 0;
}
