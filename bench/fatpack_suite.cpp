// fatpack_suite: the benchmark suite of issue 13 (docs/benchmarks.md, "Benchmark suite"). Every run
// of every case is a fresh process (bench/suite_child.cpp) with a fresh cache directory; cases are
// interleaved (round r runs every case that wants more than r runs, in table order); medians and
// ratios come out of bench/suite_report.cpp.
//
//   fatpack_suite --inputs DIR --out-dir DIR [--cases LIST] [--runs N] [--fast-runs N] [--jit-runs N]
//                 [--deadline-s S] [--tmp DIR]
//   fatpack_suite --render FILE.tsv... [--doc docs/benchmarks.md]
//   fatpack_suite --list-cases
//
// --cases: comma-separated case ids or groups (mid, big, many, procs, speed; default: all).
// --runs N sets both run counts (the smoke test's --runs 1); defaults 15 fast, 3 JIT.
// --deadline-s S: no round starts that the previous round's duration says would end after S seconds
// from the start (what was measured is kept; the report says how many runs each case got).
// Writes OUT/suite.tsv (every sample, appended as it is measured, so a killed run keeps its rounds)
// and OUT/suite.md (this run's section). --render merges several TSVs into one section; with --doc
// it replaces the section between the suite markers of that file (appends it when absent).
#include "suite.hpp"

#include "fatpack/fatpack.hpp"

#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "fatpack_suite: %s\n", what.c_str());
  std::exit(1);
}

using env_list = std::vector<std::pair<std::string, std::string>>;  // value "" = unset

struct child_proc {
  pid_t pid = -1;
  int fd = -1;
};

struct child_out {
  bool ok = false;
  double ms = -1;
  long long jits = -1;
  double cpu_s = 0;
  std::string text;
};

std::string g_self;

child_proc spawn(const std::vector<std::string>& args, const env_list& env) {
  int p[2];
  if (pipe(p) != 0) die("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    close(p[1]);
    for (const auto& [k, v] : env) v.empty() ? unsetenv(k.c_str()) : setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(g_self.c_str()), const_cast<char*>("--child")};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(g_self.c_str(), argv.data());
    _exit(127);
  }
  close(p[1]);
  return {pid, p[0]};
}

child_out finish(child_proc c) {
  child_out r;
  char buf[4096];
  for (ssize_t n; (n = read(c.fd, buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    r.text.append(buf, std::size_t(n));
  }
  close(c.fd);
  int status = 0;
  struct rusage ru {};
  while (wait4(c.pid, &status, 0, &ru) < 0 && errno == EINTR) {}
  r.cpu_s = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  const auto at = r.text.find("RESULT ");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && at != std::string::npos) {
    char* end = nullptr;
    r.ms = std::strtod(r.text.c_str() + at + 7, &end);
    r.jits = std::strtoll(end, &end, 10);
    r.ok = true;
  }
  return r;
}

std::string fresh_dir(const std::string& tmp) {
  std::string t = tmp + "/fatpack-suite-XXXXXX";
  if (!mkdtemp(t.data())) die("mkdtemp under " + tmp + " failed");
  return t;
}

void remove_dir(const std::string& d) {
  std::error_code ec;
  fs::remove_all(d, ec);
}

std::vector<std::string> expand(const std::vector<std::string>& args, const std::string& inputs) {
  std::vector<std::string> out;
  for (auto a : args) {
    if (a.rfind("@/", 0) == 0) a = inputs + a.substr(1);
    out.push_back(a);
  }
  return out;
}

struct settings {
  std::string inputs, out_dir, tmp = "/tmp";
  std::vector<const suite::case_def*> selected;
  int fast_runs = 15, jit_runs = 3;
  double deadline_s = 0;
  std::string command;
};

class tsv_writer {
 public:
  explicit tsv_writer(const std::string& path) : f_(std::fopen(path.c_str(), "w")) {
    if (!f_) die("cannot write " + path);
  }
  ~tsv_writer() { std::fclose(f_); }
  void line(const std::vector<std::string>& fields) {
    for (std::size_t i = 0; i < fields.size(); ++i) {
      std::string v = fields[i];
      std::replace(v.begin(), v.end(), '\t', ' ');
      std::replace(v.begin(), v.end(), '\n', ' ');
      std::fprintf(f_, "%s%s", i ? "\t" : "", v.c_str());
    }
    std::fputc('\n', f_);
    std::fflush(f_);
  }

 private:
  std::FILE* f_;
};

std::string num(double v, int prec = 3) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

// The environment of one run of `c`: a fresh fatpack cache unless the case is a primed hit.
env_list env_for(const suite::case_def& c, const std::string& fatpack_cache, const std::string& driver_cache) {
  env_list e{{"FATPACK_CACHE_PATH", fatpack_cache}, {"FATPACK_CACHE_DISABLE", ""}};
  if ((c.env == "driver-hit" || (c.env == "procs" && !c.fatpack_side)) && !driver_cache.empty()) {
    e.push_back({"CUDA_CACHE_DISABLE", ""});
    e.push_back({"CUDA_CACHE_PATH", driver_cache});
  } else {
    e.push_back({"CUDA_CACHE_DISABLE", "1"});
  }
  return e;
}

// Fraction of the inputs' pages in the page cache now (mincore), and their size.
std::pair<double, double> resident(const std::string& dir) {
  double total = 0, in = 0;
  const long page = sysconf(_SC_PAGESIZE);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    const int fd = open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      void* m = mmap(nullptr, std::size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) {
        std::vector<unsigned char> vec(std::size_t((st.st_size + page - 1) / page));
        if (mincore(m, std::size_t(st.st_size), vec.data()) == 0)
          for (unsigned char v : vec) in += (v & 1) ? double(page) : 0;
        munmap(m, std::size_t(st.st_size));
        total += double(vec.size()) * double(page);
      }
    }
    close(fd);
  }
  return {total > 0 ? in / total : 0, total};
}

void read_all(const std::string& dir) {
  std::error_code ec;
  std::vector<char> buf(1 << 20);
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    while (f.read(buf.data(), std::streamsize(buf.size())) || f.gcount() > 0) {}
  }
}

std::string driver_release() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  std::getline(f, line);
  const auto at = line.find("Kernel Module");
  if (at == std::string::npos) return "";
  // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...": the
  // first word made of digits and dots (the word right after "Kernel Module" is not always it).
  std::istringstream s(line.substr(at + 13));
  for (std::string v; s >> v;)
    if (!v.empty() && v.find_first_not_of("0123456789.") == std::string::npos && v.find('.') != std::string::npos) return v;
  return "";
}

// A real GPU can allocate memory; the fake driver (FATPACK_LIBCUDA, CPU smoke test) cannot.
bool real_gpu() {
  auto get = [](const char* n) { auto p = fatpack::driver_entry_point(n); return p ? *p : nullptr; };
  auto dev_get = reinterpret_cast<CUresult (*)(CUdevice*, int)>(get("cuDeviceGet"));
  auto retain = reinterpret_cast<CUresult (*)(CUcontext*, CUdevice)>(get("cuDevicePrimaryCtxRetain"));
  auto release = reinterpret_cast<CUresult (*)(CUdevice)>(get("cuDevicePrimaryCtxRelease"));
  auto set = reinterpret_cast<CUresult (*)(CUcontext)>(get("cuCtxSetCurrent"));
  auto alloc = reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(get("cuMemAlloc"));
  auto mfree = reinterpret_cast<CUresult (*)(CUdeviceptr)>(get("cuMemFree"));
  if (!dev_get || !retain || !release || !set || !alloc || !mfree) return false;
  CUdevice d = 0;
  CUcontext ctx = nullptr;
  if (dev_get(&d, 0) != CUDA_SUCCESS || retain(&ctx, d) != CUDA_SUCCESS) return false;
  set(ctx);
  CUdeviceptr p = 0;
  const bool ok = alloc(&p, 1 << 20) == CUDA_SUCCESS;
  if (ok) mfree(p);
  set(nullptr);
  release(d);
  return ok;
}

// Kernel speed: one child per JIT path; times and outputs compared against the SASS's.
struct kernel_dump {
  std::vector<std::string> names;
  std::vector<double> ms;
  std::vector<std::vector<float>> out;
  std::vector<bool> complete;  // the block held the whole tile: the results are comparable
  std::vector<std::string> shape;  // "block B, limit L": why a kernel was not compared
};

bool read_dump(const std::string& path, kernel_dump& d) {
  std::ifstream f(path, std::ios::binary);
  std::string header;
  while (std::getline(f, header)) {
    std::istringstream s(header);
    std::string name;
    double ms = 0;
    std::size_t count = 0;
    int complete = 0, block = 0, limit = 0;
    if (!(s >> name >> ms >> count >> complete >> block >> limit) || count > (1u << 24)) return false;
    std::vector<float> v(count);
    if (!f.read(reinterpret_cast<char*>(v.data()), std::streamsize(count * 4))) return false;
    f.get();  // the newline after the floats
    d.names.push_back(name);
    d.ms.push_back(ms);
    d.out.push_back(std::move(v));
    d.complete.push_back(complete == 1);
    d.shape.push_back("block " + std::to_string(block) + ", limit " + std::to_string(limit));
  }
  return !d.names.empty();
}

void run_speed(const settings& s, tsv_writer& tsv) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> paths = {
      {"sass", {"--image", "@/mid.sm_90.cubin", "--names", "@/mid.lz4.fpk"}},
      {"driver", {"--pkg", "@/mid.ptx.fpk", "--names", "@/mid.lz4.fpk"}},
      {"driver-split0", {"--pkg", "@/mid.ptx.fpk", "--names", "@/mid.lz4.fpk"}},
      {"fatpack", {"--pkg", "@/mid.ptx.fpk", "--names", "@/mid.lz4.fpk"}},
  };
  std::vector<kernel_dump> dumps;
  for (const auto& [path, extra] : paths) {
    const std::string dir = fresh_dir(s.tmp);
    std::vector<std::string> args{"speed", "--path", path, "--dump", dir + "/dump"};
    for (const auto& a : expand(extra, s.inputs)) args.push_back(a);
    const auto r = finish(spawn(args, env_for(*suite::find_case("speed"), dir, "")));
    kernel_dump d;
    if (!r.ok || !read_dump(dir + "/dump", d)) {
      std::fprintf(stderr, "%s", r.text.c_str());
      tsv.line({"X", "speed", "path " + path + " failed"});
      remove_dir(dir);
      return;
    }
    remove_dir(dir);
    dumps.push_back(std::move(d));
  }
  const kernel_dump& base = dumps[0];
  // Kernels are matched by name: each path lists them in its own image's order.
  std::map<std::string, std::size_t> base_index;
  for (std::size_t k = 0; k < base.names.size(); ++k) base_index.emplace(base.names[k], k);
  for (std::size_t p = 0; p < dumps.size(); ++p) {
    const kernel_dump& d = dumps[p];
    double log_sum = 0, max_rel = 0, sum_ms = 0;
    std::size_t within = 0, bitwise = 0, compared = 0, n = 0;
    for (std::size_t k = 0; k < d.names.size(); ++k) {
      const auto at = base_index.find(d.names[k]);
      if (at == base_index.end()) continue;
      const std::size_t j = at->second;
      ++n;
      log_sum += std::log(d.ms[k] / base.ms[j]);
      sum_ms += d.ms[k];
      if (!d.complete[k] || !base.complete[j] || d.out[k].size() != base.out[j].size()) {
        // Said, not hidden: a table of "0 of 0" once hid every kernel being skipped.
        std::fprintf(stderr, "speed: %s %s not compared: %s (%zu results) against sass %s (%zu results)\n",
                     paths[p].first.c_str(), d.names[k].c_str(), d.shape[k].c_str(), d.out[k].size(),
                     base.shape[j].c_str(), base.out[j].size());
        continue;
      }
      ++compared;
      bool close = true, same = true;
      for (std::size_t i = 0; i < d.out[k].size(); ++i) {
        const double a = base.out[j][i], b = d.out[k][i];
        if (a != b) same = false;
        const double rel = std::fabs(a - b) / std::max(1.0, std::fabs(a));
        max_rel = std::max(max_rel, rel);
        if (!(rel <= 1e-3)) close = false;  // NaN fails too
      }
      within += close;
      bitwise += same;
    }
    tsv.line({"K", paths[p].first, std::to_string(n), num(std::exp(log_sum / double(std::max<std::size_t>(n, 1))), 4),
              std::to_string(within), std::to_string(bitwise), num(max_rel, 6), num(sum_ms, 4),
              std::to_string(compared)});
  }
}

int run_suite(const settings& s) {
  if (auto st = fatpack::init(); !st) die("no CUDA driver: " + st.error().message);
  const auto dev = fatpack::device(0);
  if (!dev) die(dev.error().what());
  const bool gpu = real_gpu();
  fs::create_directories(s.out_dir);
  tsv_writer tsv(s.out_dir + "/suite.tsv");
  char date[64];
  const std::time_t t = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  const auto [res_frac, res_bytes] = resident(s.inputs);
  tsv.line({"M", "date", date});
  tsv.line({"M", "gpu", dev->name + " (CC " + std::to_string(dev->cc_major) + "." + std::to_string(dev->cc_minor) + ")"});
  const std::string rel = driver_release();
  tsv.line({"M", "driver", (rel.empty() ? "" : rel + ", ") + "CUDA " + std::to_string(dev->driver_version / 1000) + "." +
                               std::to_string(dev->driver_version % 1000 / 10) + " (" + fatpack::driver_library() + ")"});
  tsv.line({"M", "host", std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " host threads"});
  tsv.line({"M", "command", s.command});
  std::printf("fatpack_suite: %s, %s; inputs %.1f MB, %.0f%% in the page cache\n", dev->name.c_str(), date,
              res_bytes / 1e6, res_frac * 100);
  std::fflush(stdout);

  // Warm the page cache (inputs, and the driver's libraries through one untimed child), so every
  // timed run meets the same warm cache; what was resident before is reported.
  read_all(s.inputs);
  {
    const std::string d = fresh_dir(s.tmp);
    finish(spawn(expand(suite::find_case("raw")->child, s.inputs), env_for(*suite::find_case("raw"), d, "")));
    remove_dir(d);
  }
  tsv.line({"M", "page_cache",
            "warm: " + num(res_frac * 100, 0) + "% of the inputs (" + num(res_bytes / 1e6, 1) +
                " MB) were resident at the start; all were read, and one untimed child loaded the driver, before the "
                "first timed run"});

  // Cases that cannot run here, and primed caches for the hit cases.
  std::vector<const suite::case_def*> todo;
  std::map<std::string, std::string> primed;
  for (const auto* c : s.selected) {
    if (c->gpu_only && !gpu) {
      tsv.line({"X", c->id, "skipped (no GPU)"});
      continue;
    }
    todo.push_back(c);
    if (c->env == "driver-hit" || c->env == "fatpack-hit") {
      const std::string dir = fresh_dir(s.tmp);
      const std::string scratch = fresh_dir(s.tmp);  // the other side's cache, unused
      env_list e = c->env == "driver-hit" ? env_for(*c, scratch, dir) : env_for(*c, dir, "");
      const auto r = finish(spawn(expand(c->child, s.inputs), e));
      remove_dir(scratch);
      if (!r.ok) die("priming " + c->id + " failed:\n" + r.text);
      tsv.line({"P", c->id, num(r.ms), std::to_string(r.jits)});
      primed[c->id] = dir;
    }
  }
  auto runs_of = [&](const suite::case_def* c) {
    return c->id == "speed" ? 1 : c->w == suite::weight::fast ? s.fast_runs : s.jit_runs;
  };
  int max_runs = 0;
  for (const auto* c : todo) max_runs = std::max(max_runs, runs_of(c));
  const double start = now_ms();
  double last_round = 0;
  for (int round = 0; round < max_runs; ++round) {
    const double elapsed_s = (now_ms() - start) / 1000;
    if (s.deadline_s > 0 && round > 0 && elapsed_s + last_round / 1000 > s.deadline_s) {
      tsv.line({"M", "stopped", "after " + std::to_string(round) + " rounds: the next would pass --deadline-s " +
                                    num(s.deadline_s, 0)});
      std::printf("stopping after %d rounds (deadline)\n", round);
      break;
    }
    const double r0 = now_ms();
    for (const auto* c : todo) {
      if (round >= runs_of(c)) continue;
      if (c->id == "speed") {
        run_speed(s, tsv);
        continue;
      }
      const int n = c->processes;
      const std::string fp_cache = primed.count(c->id) ? primed[c->id] : fresh_dir(s.tmp);
      const std::string drv_cache = c->env == "driver-hit" ? primed[c->id] : c->env == "procs" ? fresh_dir(s.tmp) : "";
      const double w0 = now_ms();
      std::vector<child_proc> ps;
      for (int i = 0; i < n; ++i) ps.push_back(spawn(expand(c->child, s.inputs), env_for(*c, fp_cache, drv_cache)));
      std::vector<child_out> outs;
      for (auto& p : ps) outs.push_back(finish(p));
      const double wall = now_ms() - w0;
      if (!primed.count(c->id)) remove_dir(fp_cache);
      if (c->env == "procs") remove_dir(drv_cache);
      double cpu = 0;
      long long jits = 0;
      std::string each;
      bool ok = true;
      for (const auto& o : outs) {
        if (!o.ok) {
          ok = false;
          std::fprintf(stderr, "fatpack_suite: case %s failed:\n%s\n", c->id.c_str(), o.text.c_str());
        }
        cpu += o.cpu_s;
        jits += o.jits;
        each += (each.empty() ? "" : ",") + num(o.ms, 1);
      }
      if (!ok) {
        tsv.line({"F", c->id, std::to_string(round)});
        continue;
      }
      // One process: the child's own clock; several: the wall time of the group.
      const double ms = n == 1 ? outs[0].ms : wall;
      tsv.line({"S", c->id, std::to_string(round), num(ms), std::to_string(outs[0].jits < 0 ? -1 : jits), num(cpu, 3), each});
      std::printf("  round %d  %-22s %12.3f ms\n", round + 1, c->id.c_str(), ms);
      std::fflush(stdout);
    }
    last_round = now_ms() - r0;
  }
  for (const auto& [id, dir] : primed) remove_dir(dir);
  std::string err;
  const std::string md = suite::render({s.out_dir + "/suite.tsv"}, err);
  if (!err.empty()) die(err);
  std::ofstream(s.out_dir + "/suite.md") << md;
  std::printf("%s", md.c_str());
  return 0;
}

int render_main(const std::vector<std::string>& files, const std::string& doc) {
  std::string err;
  const std::string md = suite::render(files, err);
  if (!err.empty()) die(err);
  if (doc.empty()) {
    std::printf("%s", md.c_str());
    return 0;
  }
  std::ifstream in(doc);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const std::string begin = "<!-- fatpack_suite:begin -->", end = "<!-- fatpack_suite:end -->";
  const std::string block = begin + "\n" + md + end + "\n";
  const auto b = text.find(begin), e = text.find(end);
  if (b != std::string::npos && e != std::string::npos && e > b) {
    const auto after = text.find('\n', e);
    text.replace(b, (after == std::string::npos ? text.size() : after + 1) - b, block);
  } else {
    text += (text.empty() || text.back() == '\n' ? "\n" : "\n\n") + block;
  }
  std::ofstream(doc) << text;
  std::printf("updated %s\n", doc.c_str());
  return 0;
}

void usage() {
  std::fprintf(stderr,
               "usage: fatpack_suite --inputs DIR --out-dir DIR [--cases LIST] [--runs N] [--fast-runs N] [--jit-runs N]\n"
               "                     [--deadline-s S] [--tmp DIR]\n"
               "       fatpack_suite --render FILE.tsv... [--doc docs/benchmarks.md]\n"
               "       fatpack_suite --list-cases\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  g_self = n > 0 ? std::string(self, std::size_t(n)) : argv[0];
  if (!a.empty() && a[0] == "--child") return suite::child_main({a.begin() + 1, a.end()});
  if (!a.empty() && a[0] == "--list-cases") {
    for (const auto& c : suite::cases()) std::printf("%s %s%s\n", c.id.c_str(), c.group.c_str(), c.gpu_only ? " gpu-only" : "");
    return 0;
  }
  if (!a.empty() && a[0] == "--render") {
    std::vector<std::string> files;
    std::string doc;
    for (std::size_t i = 1; i < a.size(); ++i) {
      if (a[i] == "--doc" && i + 1 < a.size()) doc = a[++i];
      else files.push_back(a[i]);
    }
    if (files.empty()) return usage(), 2;
    return render_main(files, doc);
  }
  settings s;
  for (int i = 0; i < argc; ++i) s.command += (i ? " " : "") + std::string(i ? argv[i] : "fatpack_suite");
  std::string list;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= a.size()) {
        usage();
        std::exit(2);
      }
      return a[++i];
    };
    if (a[i] == "--inputs") s.inputs = fs::absolute(value()).string();
    else if (a[i] == "--out-dir") s.out_dir = value();
    else if (a[i] == "--cases") list = value();
    else if (a[i] == "--runs") s.fast_runs = s.jit_runs = std::max(1, std::atoi(value().c_str()));
    else if (a[i] == "--fast-runs") s.fast_runs = std::max(1, std::atoi(value().c_str()));
    else if (a[i] == "--jit-runs") s.jit_runs = std::max(1, std::atoi(value().c_str()));
    else if (a[i] == "--deadline-s") s.deadline_s = std::atof(value().c_str());
    else if (a[i] == "--tmp") s.tmp = value();
    else {
      usage();
      return 2;
    }
  }
  if (s.inputs.empty() || s.out_dir.empty()) return usage(), 2;
  std::vector<std::string> wanted;
  for (std::size_t p = 0; p <= list.size();) {
    const auto q = std::min(list.find(',', p), list.size());
    if (q > p) wanted.push_back(list.substr(p, q - p));
    p = q + 1;
  }
  for (const auto& c : suite::cases()) {
    const bool take = wanted.empty() || std::find(wanted.begin(), wanted.end(), c.id) != wanted.end() ||
                      std::find(wanted.begin(), wanted.end(), c.group) != wanted.end();
    if (take) s.selected.push_back(&c);
  }
  for (const auto& w : wanted) {
    const bool known = std::any_of(suite::cases().begin(), suite::cases().end(),
                                   [&](const suite::case_def& c) { return c.id == w || c.group == w; });
    if (!known) die("unknown case or group '" + w + "' (--list-cases lists them)");
  }
  return run_suite(s);
}
