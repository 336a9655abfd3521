// fatpack_cache_bench: the JIT cache's costs (docs/cache.md §11). Not a test.
//
//   fatpack_cache_bench [--cubin FILE]... [--ptx FILE]... [--entries N] [--runs N] [--dir DIR]
//
//  1. Index: mapped size for N entries (default 100,000) and the latency of a lookup (present and
//     absent keys), lock-free, as a hit does it.
//  2. A hit reads one entry: the file-system calls of one exact hit, counted through the seam.
//  3. Per cubin (default: the build's vadd.sm_*.cubin; pass larger ones, e.g. the mid/big sets of
//     bench/gen_kernels.py): cache bytes per cubin byte; time of a hit (open, read, checks, LZ4) vs
//     reading the cubin file; and, through the driver (FATPACK_LIBCUDA, else libcuda.so.1; the fake
//     driver on a CPU machine), a hit + cuModuleLoadData vs cuModuleLoadData of the cubin read from
//     its file. Medians of --runs (default 31) interleaved runs.
//  4. Per PTX file (--ptx; needs a driver): JIT once through cuLink, store, then interleave (a) the
//     cubin loaded from its file, (b) a fatpack cache hit + load, (c) the driver's own cache hit
//     (cuModuleLoadData of the PTX with a warm CUDA_CACHE_PATH, fresh for this run). Every load
//     touches every kernel (cuModuleGetFunction), so lazy loading hides nothing (docs/benchmarks.md).
#include "cache/fs.hpp"
#include "cache/index.hpp"
#include "cache/key.hpp"
#include "cache/store.hpp"
#include "platform/device.hpp"
#include "platform/driver.hpp"
#include "jit/culink.hpp"

#include "fatpack/core/input.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

using namespace fatpack::detail;
using namespace fatpack::detail::cache;
using clk = std::chrono::steady_clock;

namespace {

double us_since(clk::time_point t0) { return std::chrono::duration<double, std::micro>(clk::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The direct way to get a cubin: open, fstat, one read.
std::vector<std::uint8_t> slurp(const std::string& path) {
  fs& f = posix_fs();
  std::vector<std::uint8_t> out;
  int fd = -1;
  if (f.open(path, open_mode::read, fd)) return out;
  file_stat st;
  std::size_t got = 0;
  if (f.fstat(fd, st) == 0) {
    out.resize(static_cast<std::size_t>(st.size));
    f.pread(fd, out.data(), out.size(), 0, got);
  }
  f.close(fd);
  out.resize(got);
  return out;
}

// Counts the seam's calls (for "a hit reads one entry").
class counting_fs final : public fs {
 public:
  fs& r = posix_fs();
  int opens = 0, reads = 0, lists = 0, stats = 0;
  int open(const std::string& p, open_mode m, int& fd) override { ++opens; return r.open(p, m, fd); }
  void close(int fd) override { r.close(fd); }
  int pread(int fd, void* b, std::size_t n, std::uint64_t o, std::size_t& g) override { ++reads; return r.pread(fd, b, n, o, g); }
  int pwrite(int fd, const void* b, std::size_t n, std::uint64_t o) override { return r.pwrite(fd, b, n, o); }
  int allocate(int fd, std::uint64_t n) override { return r.allocate(fd, n); }
  int fstat(int fd, file_stat& s) override { return r.fstat(fd, s); }
  int map_read(int fd, std::uint64_t n, const void*& a) override { ++reads; return r.map_read(fd, n, a); }
  int stat(const std::string& p, file_stat& s) override { ++stats; return r.stat(p, s); }
  int mkdir(const std::string& p, std::uint32_t m) override { return r.mkdir(p, m); }
  int chmod(const std::string& p, std::uint32_t m) override { return r.chmod(p, m); }
  int rename(const std::string& a, const std::string& b) override { return r.rename(a, b); }
  int unlink(const std::string& p) override { return r.unlink(p); }
  int rmdir(const std::string& p) override { return r.rmdir(p); }
  int list_dir(const std::string& p, std::vector<std::string>& n) override { ++lists; return r.list_dir(p, n); }
  int try_flock(int fd) override { return r.try_flock(fd); }
  int try_byte_lock(int fd, std::uint64_t o) override { return r.try_byte_lock(fd, o); }
  int byte_unlock(int fd, std::uint64_t o) override { return r.byte_unlock(fd, o); }
  bool network_fs(const std::string& p) override { return r.network_fs(p); }
  std::uint32_t euid() override { return r.euid(); }
  std::string passwd_home() override { return r.passwd_home(); }
  bool privileged_exec() override { return r.privileged_exec(); }
  std::int64_t now_unix_s() override { return r.now_unix_s(); }
  std::int64_t now_unix_ns() override { return r.now_unix_ns(); }
  int pid() override { return r.pid(); }
};

// cuModuleLoadDataEx + cuModuleGetFunction of every kernel + unload; microseconds, or -1 on failure.
double load_touch(const driver& d, const void* image, const std::vector<std::string>& kernels) {
  auto t0 = clk::now();
  CUmodule m = nullptr;
  if (d.cuModuleLoadDataEx(&m, image, 0, nullptr, nullptr) != CUDA_SUCCESS) return -1;
  for (const auto& k : kernels) {
    CUfunction f = nullptr;
    if (d.cuModuleGetFunction(&f, m, k.c_str()) != CUDA_SUCCESS) return -1;
  }
  double us = us_since(t0);
  d.cuModuleUnload(m);
  return us;
}

std::vector<std::string> kernels_of(const std::vector<std::uint8_t>& cubin) {
  auto info = fatpack::core::parse_cubin(fatpack::core::byte_span(cubin), "cubin");
  return info ? info->kernels : std::vector<std::string>{};
}

jit_key key_for(std::uint64_t h, std::uint32_t arch) {
  jit_key k;
  k.ptx_xxh3 = h;
  k.ptx_size = 1000;
  k.ptx_target = fatpack::core::target::parse("compute_80").value();
  k.ptx_isa = fatpack::core::ptx_isa{9, 0};
  k.target_arch = arch;
  k.driver_version = 13000;
  return k;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> cubins, ptxs;
  int entries = 100000, runs = 31;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--cubin" && i + 1 < argc) cubins.push_back(argv[++i]);
    else if (a == "--ptx" && i + 1 < argc) ptxs.push_back(argv[++i]);
    else if (a == "--entries" && i + 1 < argc) entries = std::atoi(argv[++i]);
    else if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--cubin FILE]... [--ptx FILE]... [--entries N] [--runs N] [--dir DIR]\n", argv[0]);
      return 2;
    }
  }
  if (cubins.empty())
    for (const char* sm : {"75", "80", "86", "89", "90"}) cubins.push_back(std::string(FATPACK_TEST_ARTIFACTS) + "/vadd.sm_" + sm + ".cubin");
  if (dir.empty()) {
    char tmpl[] = "/tmp/fatpack-cache-bench-XXXXXX";
    dir = mkdtemp(tmpl);
  }
  std::printf("cache directory: %s\n", dir.c_str());
  make_dirs(posix_fs(), dir + "/v1/objects", 0700);
  // The driver's own cache, for (c): fresh, enabled (before the driver loads).
  setenv("CUDA_CACHE_PATH", (dir + "/driver-cache").c_str(), 1);
  unsetenv("CUDA_CACHE_DISABLE");

  // 1. The index.
  {
    std::mt19937_64 rng(1);
    std::vector<index_slot> slots(static_cast<std::size_t>(entries));
    for (auto& s : slots) {
      for (auto& b : s.code) b = static_cast<std::uint8_t>(rng());
      s.driver = rng();
      s.disk_bytes = 100000;
    }
    const std::string path = dir + "/v1/index.v1";
    if (index_file::create(path, slots, default_index_capacity, 0) != 0) {
      std::printf("cannot create %s\n", path.c_str());
      return 1;
    }
    std::string why;
    auto idx = index_file::map(path, false, why);
    if (!idx) {
      std::printf("cannot map the index: %s\n", why.c_str());
      return 1;
    }
    std::vector<double> hit_ns, miss_ns;
    std::uniform_int_distribution<std::size_t> pick(0, slots.size() - 1);
    std::size_t found = 0;
    for (int r = 0; r < 11; ++r) {
      const int n = 100000;
      auto t0 = clk::now();
      for (int i = 0; i < n; ++i) {
        const auto& s = slots[pick(rng)];
        found += idx->find(s.code, s.driver, nullptr);
      }
      hit_ns.push_back(us_since(t0) * 1000 / n);
      t0 = clk::now();
      for (int i = 0; i < n; ++i) {
        std::array<std::uint8_t, 16> c;
        for (auto& b : c) b = static_cast<std::uint8_t>(rng());
        found += idx->find(c, 1, nullptr);
      }
      miss_ns.push_back(us_since(t0) * 1000 / n);
    }
    std::printf("index: %d entries, capacity %u slots, mapped file %.2f MiB (%zu bytes/slot)\n", entries, idx->capacity(),
                idx->file_bytes() / 1048576.0, index_slot_bytes);
    std::printf("index lookup (lock-free, incl. the random key pick): present %.0f ns, absent %.0f ns (median of 11 x 100,000; %zu found)\n",
                median(hit_ns), median(miss_ns), found);
    posix_fs().unlink(path);
  }

  // 2-3. Entries.
  auto cd = cache_dir::open(dir, true, 1ull << 40, "bench", false);
  const auto& drv_r = load_devices();
  const device_set* ds = drv_r ? *drv_r : nullptr;
  if (!ds) std::printf("driver: %s (no load timings)\n", drv_r.error().message.c_str());
  else std::printf("driver: %s, device %s\n", ds->drv->identify().c_str(), ds->devices[0].identify().c_str());
  primary_context ctx;
  if (ds) {
    auto c = primary_context::retain(*ds->drv, ds->devices[0]);
    if (c) ctx = std::move(*c);
  }
  std::printf("\n%-44s %10s %10s %8s %10s %10s %12s %12s %6s\n", "cubin", "bytes", "entry", "ratio", "read us", "hit us",
              "load us", "hit+load us", "x");
  std::uint64_t sum_cubin = 0, sum_entry = 0;
  std::uint64_t key_n = 1;
  for (const auto& file : cubins) {
    auto cubin = slurp(file);
    if (cubin.empty()) {
      std::printf("%s: cannot read\n", file.c_str());
      continue;
    }
    auto sm = cubin_sm_word(fatpack::core::byte_span(cubin));
    if (!sm) {
      std::printf("%s: not a cubin\n", file.c_str());
      continue;
    }
    const full_key k = make_full_key(key_for(key_n++, sm_arch(*sm)));
    std::string why;
    if (cd->write(k, fatpack::core::byte_span(cubin), why) != 0) {
      std::printf("%s: store failed: %s\n", file.c_str(), why.c_str());
      continue;
    }
    file_stat st;
    posix_fs().stat(cd->entry_path(k), st);
    sum_cubin += cubin.size();
    sum_entry += st.size;
    std::vector<double> read_us, hit_us, load_us, hitload_us;
    const std::vector<std::string> kernels = kernels_of(cubin);
    for (int r = 0; r < runs; ++r) {
      // Plain: read the cubin file.
      auto t0 = clk::now();
      auto raw = slurp(file);
      read_us.push_back(us_since(t0));
      t0 = clk::now();
      auto hit = cd->read_exact(k, sm_arch(*sm));
      hit_us.push_back(us_since(t0));
      if (!hit || *hit != cubin) {
        std::printf("%s: the hit returned other bytes\n", file.c_str());
        return 1;
      }
      if (ds && ctx.get()) {
        scoped_context cur(*ds->drv, ctx.get());
        t0 = clk::now();
        auto raw2 = slurp(file);
        double l = load_touch(*ds->drv, raw2.data(), kernels);
        if (l >= 0) load_us.push_back(us_since(t0));
        t0 = clk::now();
        auto h2 = cd->read_exact(k, sm_arch(*sm));
        l = h2 ? load_touch(*ds->drv, h2->data(), kernels) : -1;
        if (l >= 0) hitload_us.push_back(us_since(t0));
      }
    }
    std::string name = file.substr(file.find_last_of('/') + 1);
    const double l = median(load_us), hl = median(hitload_us);
    std::printf("%-44s %10zu %10llu %8.3f %10.1f %10.1f %12.1f %12.1f %6.2f\n", name.c_str(), cubin.size(),
                static_cast<unsigned long long>(st.size), double(st.size) / double(cubin.size()), median(read_us),
                median(hit_us), l, hl, l > 0 ? hl / l : 0.0);
  }
  if (sum_cubin)
    std::printf("cache bytes per cubin byte (all): %.3f\n", double(sum_entry) / double(sum_cubin));

  // 4. Against the driver's own cache.
  for (const auto& file : ptxs) {
    if (!ds || !ctx.get()) {
      std::printf("%s: needs a driver\n", file.c_str());
      continue;
    }
    auto ptx = slurp(file);
    ptx.push_back(0);
    scoped_context cur(*ds->drv, ctx.get());
    auto t0 = clk::now();
    auto out = jit_link(*ds->drv, fatpack::core::byte_span(ptx.data(), ptx.size()), file, jit_options{}, std::nullopt);
    if (!out) {
      std::printf("%s: JIT failed: %s\n", file.c_str(), out.error().message.c_str());
      continue;
    }
    const double jit_ms = us_since(t0) / 1000;
    const std::vector<std::string> kernels = kernels_of(out->sass);
    auto sm = cubin_sm_word(fatpack::core::byte_span(out->sass));
    const full_key k = make_full_key(key_for(key_n++, sm ? sm_arch(*sm) : 0));
    std::string why;
    if (!sm || cd->write(k, fatpack::core::byte_span(out->sass), why) != 0) {
      std::printf("%s: store failed: %s\n", file.c_str(), why.c_str());
      continue;
    }
    const std::string cubin_file = dir + "/direct.cubin";
    FILE* f = std::fopen(cubin_file.c_str(), "wb");
    if (!f || std::fwrite(out->sass.data(), 1, out->sass.size(), f) != out->sass.size()) return 1;
    std::fclose(f);
    t0 = clk::now();
    const double warmup = load_touch(*ds->drv, ptx.data(), kernels);  // fills the driver's cache
    const double driver_jit_ms = us_since(t0) / 1000;
    std::vector<double> direct, hit, drv_hit;
    for (int r = 0; r < runs && warmup >= 0; ++r) {
      t0 = clk::now();
      auto raw = slurp(cubin_file);
      if (load_touch(*ds->drv, raw.data(), kernels) >= 0) direct.push_back(us_since(t0));
      t0 = clk::now();
      auto h = cd->read_exact(k, sm_arch(*sm));
      if (h && load_touch(*ds->drv, h->data(), kernels) >= 0) hit.push_back(us_since(t0));
      t0 = clk::now();
      if (load_touch(*ds->drv, ptx.data(), kernels) >= 0) drv_hit.push_back(us_since(t0));
    }
    file_stat st;
    posix_fs().stat(cd->entry_path(k), st);
    std::uint64_t drv_bytes = 0;
    {
      std::string cmd = "du -sb '" + dir + "/driver-cache' 2>/dev/null";
      if (FILE* p = popen(cmd.c_str(), "r")) {
        unsigned long long b = 0;
        if (std::fscanf(p, "%llu", &b) == 1) drv_bytes = b;
        pclose(p);
      }
    }
    const double dm = median(direct), hm = median(hit), vm = median(drv_hit);
    std::printf("\n%s: cuLink JIT %.1f ms (driver module-load JIT %.1f ms); cubin %zu bytes, %zu kernels\n", file.c_str(),
                jit_ms, driver_jit_ms, out->sass.size(), kernels.size());
    std::printf("  medians of %zu interleaved runs: direct cubin load %.1f us, fatpack cache hit + load %.1f us (%.2fx), "
                "driver cache hit %.1f us (%.2fx)\n",
                direct.size(), dm, hm, dm > 0 ? hm / dm : 0.0, vm, dm > 0 ? vm / dm : 0.0);
    std::printf("  bytes per cubin byte: fatpack %.3f, driver cache %.3f (whole CUDA_CACHE_PATH)\n",
                double(st.size) / double(out->sass.size()), double(drv_bytes) / double(out->sass.size()));
  }

  // A hit touches one entry: count the file-system calls of one.
  {
    counting_fs cfs;
    set_fs_for_testing(&cfs);
    auto sm = cubin_sm_word(fatpack::core::byte_span(slurp(cubins[0])));
    full_key k1 = make_full_key(key_for(1, sm ? sm_arch(*sm) : 0));
    cd->index();  // mapped already (a process maps it once)
    cfs.opens = cfs.reads = cfs.lists = cfs.stats = 0;
    auto hit = cd->read_exact(k1, sm ? sm_arch(*sm) : 0);
    set_fs_for_testing(nullptr);
    std::printf("one hit: %d open, %d read, %d directory listings, %d stat (%s)\n", cfs.opens, cfs.reads, cfs.lists, cfs.stats,
                hit ? "hit" : "MISS");
  }
  std::string cmd = "rm -rf '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) return 1;
  return 0;
}
