// fatpack_runtime_probe: a small program the runtime tests start as a child process, so that each
// driver configuration (FATPACK_LIBCUDA, FAKECUDA_*, FATPACK_*, CUDA_*_PTX_JIT) gets a fresh process:
// the runtime loads the driver once per process, as a product does.
//
//   fatpack_runtime_probe [--package FILE]... [--image FILE MODULE]... [--embed FILE]
//                         [--policy prefer_sass|force_ptx|sass_only] [--device N] [--threads N] [--log-sink]
//                         [--warm] [devices] [load MODULE]... [load-library MODULE]
//                         [--prebuilt DIR] [--rotate N] [load-all] [cache-wait] [cache-stats]
//                         [remote-stats] [libs] [fork MODULE] [rewrite FILE SIZE] [sleep MS] [kernel NAME]
//                         [entry SYMBOL]
//
// Output, one line per result (parsed by the tests):
//   devices count=2
//   device 0 cc=9.0 name=... max_ptx_isa=9.0 driver=13000
//   load vadd device=0 ok entry=4 target=sm_90 jit=0 reused=0 jit_ms=0.000 from_cache=0
//   load vadd error=no_driver cuda=0 message=...
//   load-library vadd ok entry=4 target=sm_90 jit=0          (load_library; error=... as for load)
//   trace| <load_report::trace() lines>
//   load-all modules=200 ok=200 failed=0 wrong=0 jit=3 cache=197     (every module of every package,
//            starting at module N of --rotate N; `wrong`: a kernel of the module does not resolve in
//            the loaded SASS, i.e. bytes of another key were served)
//   cache mode=read-write hits_exact=3 hits_other=0 misses=1 jits=1 refreshes=0 stores=1 rejected=0 ...
//   fork status=0 init=cuda load=cuda warm=cuda done=1 refresh=returned message=...   (a fork() child
//            tried init, load_module MODULE and warm().wait(), each must fail with an error saying
//            why, then wait_cache_refresh(), which must return; the child is killed by SIGALRM after
//            20 s if anything hangs: status=hung)
//   rewrite FILE SIZE: FILE rewritten in place as `cp` does (O_TRUNC, then SIZE bytes 0xAB), so that a
//            mapping of it would lose its pages (SIGBUS on the next read past the new end)
//   sleep MS: waits MS milliseconds (background work goes on meanwhile)
//   kernel NAME: function(NAME) of the last module loaded: "kernel NAME ok" or "kernel NAME error=..."
// Exit status: 0 when every command succeeded, 1 otherwise, 2 on usage errors.
//
// Built three times: fatpack_runtime_probe; fatpack_runtime_probe_embedded (FATPACK_PROBE_EMBED),
// which carries one registry record in the `fatpack_registry` section whose bytes are a buffer the
// program fills from --embed FILE before the first registry use; and fatpack_runtime_probe_cli_embed,
// linked with real `fatpack embed` output and a shared library holding another (see CMakeLists.txt).
#include "fatpack/fatpack.hpp"

#include "fatpack/core/registry_record.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#ifdef FATPACK_PROBE_EMBED
namespace {
alignas(64) std::uint8_t g_embedded[4 << 20];
const char g_embedded_name[] = "probe_embedded";
}  // namespace
extern "C" __attribute__((section("fatpack_registry"), used, retain, aligned(8)))
const fatpack::core::registry_record fatpack_probe_record = {
    fatpack::core::registry_record_magic, fatpack::core::registry_record_version, g_embedded_name, g_embedded,
    g_embedded + sizeof g_embedded};
#endif

#ifdef FATPACK_PROBE_DSO_ANCHOR
extern "C" int fatpack_test_dso_anchor(void);
#endif

namespace {

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = '|';
  return s;
}

void print_trace(const std::string& t) {
  std::size_t pos = 0;
  while (pos <= t.size()) {
    std::size_t nl = t.find('\n', pos);
    std::printf("trace| %s\n", t.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos).c_str());
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
#ifdef FATPACK_PROBE_DSO_ANCHOR
  if (fatpack_test_dso_anchor() != 42) return 2;
#endif
  std::vector<std::string> args(argv + 1, argv + argc);
  fatpack::load_options opts;
  bool ok = true, warm = false;
  std::size_t rotate = 0;
  std::vector<fatpack::module> keep;  // modules stay loaded until exit
  std::vector<fatpack::library> libs;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "probe: %s needs an argument\n", a.c_str());
        std::exit(2);
      }
      return args[++i];
    };
    if (a == "--log-sink") {
      // Every log line to stdout as "sink| LEVEL: text" (fatpack::set_log_callback), set before any
      // other use of fatpack in this process.
      fatpack::set_log_callback([](fatpack::log_level level, std::string_view line) {
        std::printf("sink| %d: %.*s\n", static_cast<int>(level), static_cast<int>(line.size()), line.data());
      });
    } else if (a == "--package") {
      auto s = fatpack::add_package_file(next());
      if (!s) {
        std::printf("add error=%s message=%s\n", fatpack::errc_name(s.error().code), one_line(s.error().message).c_str());
        ok = false;
      }
    } else if (a == "--image") {
      std::string file = next();
      std::string module = next();
      auto bytes = read_file(file);
      auto s = fatpack::add_image(bytes.data(), bytes.size(), module);
      if (!s) {
        std::printf("add error=%s message=%s\n", fatpack::errc_name(s.error().code), one_line(s.error().message).c_str());
        ok = false;
      }
    } else if (a == "--embed") {
#ifdef FATPACK_PROBE_EMBED
      auto bytes = read_file(next());
      if (bytes.size() > sizeof g_embedded) return 2;
      std::memcpy(g_embedded, bytes.data(), bytes.size());
#else
      std::fprintf(stderr, "probe: --embed needs fatpack_runtime_probe_embedded\n");
      return 2;
#endif
    } else if (a == "--policy") {
      std::string p = next();
      opts.policy = p == "force_ptx" ? fatpack::policy::force_ptx
                    : p == "sass_only" ? fatpack::policy::sass_only
                                       : fatpack::policy::prefer_sass;
    } else if (a == "--device") {
      opts.device = std::atoi(next().c_str());
    } else if (a == "--upgrade") {
      fatpack::set_background_upgrade(next() == "on");
    } else if (a == "--threads") {
      fatpack::set_jit_threads(static_cast<unsigned>(std::atoi(next().c_str())));
    } else if (a == "--prebuilt") {
      auto s = fatpack::add_prebuilt_cache(next());
      if (!s) {
        std::printf("prebuilt error=%s message=%s\n", fatpack::errc_name(s.error().code), one_line(s.error().message).c_str());
        ok = false;
      }
    } else if (a == "--rotate") {
      rotate = static_cast<std::size_t>(std::atol(next().c_str()));
    } else if (a == "load-all") {
      std::vector<std::string> mods;
      if (auto ps = fatpack::packages())
        for (const auto& p : *ps) mods.insert(mods.end(), p.modules.begin(), p.modules.end());
      std::size_t good = 0, failed = 0, wrong = 0, jit = 0, cached = 0;
      for (std::size_t k = 0; k < mods.size(); ++k) {
        const std::string& module = mods[(k + rotate) % mods.size()];
        auto m = fatpack::load_module(module, opts);
        if (!m) {
          ++failed;
          std::printf("load %s error=%s message=%s\n", module.c_str(), fatpack::errc_name(m.error().code),
                      one_line(m.error().what()).c_str());
          continue;
        }
        bool right = true;
        for (const auto& kname : m->kernels())
          if (!m->function(kname)) right = false;
        if (!right) {
          ++wrong;
          std::printf("load %s wrong SASS: %s\n", module.c_str(), one_line(m->report().trace()).c_str());
          continue;
        }
        ++good;
        const auto& r = m->report();
        if (r.jit && r.jit_path.find("(cache") != std::string::npos) ++cached;
        else if (r.jit && !r.jit_reused) ++jit;
      }
      std::printf("load-all modules=%zu ok=%zu failed=%zu wrong=%zu jit=%zu cache=%zu\n", mods.size(), good, failed,
                  wrong, jit, cached);
      if (failed || wrong) ok = false;
    } else if (a == "cache-wait") {
      fatpack::wait_cache_refresh();
    } else if (a == "sleep") {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(next().c_str())));
    } else if (a == "cache-stats") {
      auto st = fatpack::cache_stats();
      auto info = fatpack::cache_status();
      std::printf("cache mode=%s path=%s hits_exact=%llu hits_other=%llu misses=%llu jits=%llu refreshes=%llu "
                  "upgrades=%llu stores=%llu rejected=%llu evictions=%llu waited=%llu bytes_read=%llu bytes_written=%llu "
                  "io_errors=%llu prebuilt=%zu\n",
                  fatpack::cache_mode_name(info.mode), info.path.c_str(), (unsigned long long)st.hits_exact,
                  (unsigned long long)st.hits_other_driver, (unsigned long long)st.misses, (unsigned long long)st.jits,
                  (unsigned long long)st.refreshes, (unsigned long long)st.upgrades, (unsigned long long)st.stores, (unsigned long long)st.rejected,
                  (unsigned long long)st.evictions, (unsigned long long)st.waited, (unsigned long long)st.bytes_read,
                  (unsigned long long)st.bytes_written, (unsigned long long)st.io_errors, info.prebuilt.size());
    } else if (a == "remote-stats") {
      auto st = fatpack::cache_stats();
      std::printf("remote hits=%llu misses=%llu uploads=%llu present=%llu rejected=%llu faults=%llu skipped=%llu "
                  "lease_waits=%llu described=%s\n",
                  (unsigned long long)st.remote_hits, (unsigned long long)st.remote_misses,
                  (unsigned long long)st.remote_uploads, (unsigned long long)st.remote_present,
                  (unsigned long long)st.remote_rejected, (unsigned long long)st.remote_faults,
                  (unsigned long long)st.remote_skipped, (unsigned long long)st.remote_lease_waits,
                  fatpack::cache_status().remote.empty() ? "none" : "yes");
    } else if (a == "libs") {
      // Which fleet cache client libraries this process has mapped (they are dlopen-ed on use only).
      std::ifstream maps("/proc/self/maps");
      std::string line;
      bool curl = false, hiredis = false;
      while (std::getline(maps, line)) {
        curl = curl || line.find("libcurl") != std::string::npos;
        hiredis = hiredis || line.find("libhiredis") != std::string::npos;
      }
      std::printf("libs curl=%d hiredis=%d\n", curl ? 1 : 0, hiredis ? 1 : 0);
    } else if (a == "fork") {
      const std::string module = next();
      std::fflush(stdout);
      int fds[2];
      if (::pipe(fds) != 0) return 2;
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::close(fds[0]);
        ::alarm(20);  // a hang ends as SIGALRM, which the parent reports
        std::string out;
        bool all_failed = true;
        std::string message;
        auto note = [&](const char* what, const fatpack::error* e) {
          out += std::string(" ") + what + "=" + (e ? fatpack::errc_name(e->code) : "ok");
          if (!e) all_failed = false;
          else if (message.empty()) message = one_line(e->message);
        };
        auto st = fatpack::init();
        note("init", st ? nullptr : &st.error());
        auto m = fatpack::load_module(module, opts);
        note("load", m ? nullptr : &m.error());
        auto h = fatpack::warm();
        auto w = h.wait();
        note("warm", w ? nullptr : &w.error());
        out += " done=" + std::to_string(h.done() ? 1 : 0);
        fatpack::wait_cache_refresh();  // must return: the parent's pending work is not the child's
        out += " refresh=returned message=" + message + "\n";
        (void)!::write(fds[1], out.data(), out.size());
        ::_exit(all_failed ? 0 : 1);
      }
      ::close(fds[1]);
      std::string got;
      char buf[4096];
      for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
      ::close(fds[0]);
      int wst = 0;
      ::waitpid(pid, &wst, 0);
      const bool hung = WIFSIGNALED(wst) && WTERMSIG(wst) == SIGALRM;
      std::printf("fork status=%s%s", hung ? "hung" : WIFEXITED(wst) ? std::to_string(WEXITSTATUS(wst)).c_str() : "signal",
                  got.empty() ? "\n" : got.c_str());
      if (hung || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0) ok = false;
    } else if (a == "--warm") {
      warm = true;
    } else if (a == "entry") {
      // driver_entry_point(SYMBOL) with the default ABI: "entry SYMBOL ok" or "entry SYMBOL error=...".
      const std::string sym = next();
      auto e = fatpack::driver_entry_point(sym.c_str());
      if (e) std::printf("entry %s ok\n", sym.c_str());
      else std::printf("entry %s error=%s\n", sym.c_str(), e.error().what());
      ok = ok && e.has_value();
    } else if (a == "devices") {
      auto n = fatpack::device_count();
      if (!n) {
        std::printf("devices error=%s cuda=%d message=%s\n", fatpack::errc_name(n.error().code), n.error().cuda_status,
                    one_line(n.error().message).c_str());
        ok = false;
        continue;
      }
      std::printf("devices count=%d\n", *n);
      for (int d = 0; d < *n; ++d) {
        auto info = fatpack::device(d).value();
        std::printf("device %d cc=%d.%d name=%s max_ptx_isa=%s driver=%d uuid=%s\n", d, info.cc_major, info.cc_minor,
                    info.name.c_str(), info.max_ptx_isa.c_str(), info.driver_version, info.uuid_str.c_str());
      }
    } else if (a == "rewrite") {
      const std::string file = next();
      const std::vector<char> junk(std::strtoul(next().c_str(), nullptr, 10), char(0xAB));
      std::ofstream f(file, std::ios::binary | std::ios::trunc);  // the same inode, like cp over it
      f.write(junk.data(), std::streamsize(junk.size()));
      if (!f.good()) ok = false;
    } else if (a == "kernel") {
      // function() of the last module loaded: with kernel-granular JIT, its piece compiles (or is
      // read from the cache) and loads now.
      const std::string name = next();
      if (keep.empty()) {
        std::printf("kernel %s error=no module loaded\n", name.c_str());
        ok = false;
        continue;
      }
      auto f = keep.back().function(name);
      if (f) {
        std::printf("kernel %s ok\n", name.c_str());
      } else {
        std::printf("kernel %s error=%s message=%s\n", name.c_str(), fatpack::errc_name(f.error().code),
                    one_line(f.error().what()).c_str());
        ok = false;
      }
    } else if (a == "load-library") {
      std::string module = next();
      auto l = fatpack::load_library(module, opts);
      if (!l) {
        std::printf("load-library %s error=%s cuda=%d message=%s\n", module.c_str(), fatpack::errc_name(l.error().code),
                    l.error().cuda_status, one_line(l.error().what()).c_str());
        ok = false;
        continue;
      }
      const auto& r = l->report();
      std::printf("load-library %s ok entry=%zu target=%s jit=%d\n", module.c_str(), r.entry, r.target.c_str(),
                  r.jit ? 1 : 0);
      libs.push_back(std::move(l.value()));
    } else if (a == "load") {
      std::string module = next();
      if (warm) {
        warm = false;
        auto t0 = std::chrono::steady_clock::now();
        auto h = fatpack::warm();
        auto s = h.wait();
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        std::printf("warm jobs=%zu %s ms=%.1f\n", h.jobs(), s ? "ok" : ("error=" + one_line(s.error().message)).c_str(), ms);
      }
      auto m = fatpack::load_module(module, opts);
      if (!m) {
        std::printf("load %s error=%s cuda=%d message=%s\n", module.c_str(), fatpack::errc_name(m.error().code),
                    m.error().cuda_status, one_line(m.error().what()).c_str());
        ok = false;
        continue;
      }
      const auto& r = m->report();
      std::printf("load %s device=%d ok entry=%zu target=%s jit=%d reused=%d jit_ms=%.3f from_cache=%d\n", module.c_str(),
                  r.device, r.entry, r.target.c_str(), r.jit ? 1 : 0, r.jit_reused ? 1 : 0, r.jit_ms, r.jit_from_cache ? 1 : 0);
      print_trace(r.trace());
      keep.push_back(std::move(m.value()));
    } else {
      std::fprintf(stderr, "probe: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  return ok ? 0 : 1;
}
