// Package size per codec against nvcc's compressed fatbin, and entry decompression speed.
//   fatpack_codec_bench [--nvcc-fatbin FILE] [--runs N] PACKAGE...
// Each package is read into memory once; every entry is decompressed `runs` times on 1 thread and on
// all cores; medians are reported (GB/s = raw bytes / second).
#include "fatpack/core/codec.hpp"
#include "fatpack/core/package.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

using namespace fatpack::core;

static std::vector<std::uint8_t> read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(1);
  }
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  std::string nvcc_fatbin;
  int runs = 21;
  std::vector<std::string> packages;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--nvcc-fatbin" && i + 1 < argc) nvcc_fatbin = argv[++i];
    else if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else packages.push_back(a);
  }
  if (packages.empty()) {
    std::fprintf(stderr, "usage: fatpack_codec_bench [--nvcc-fatbin FILE] [--runs N] PACKAGE...\n");
    return 2;
  }
  const std::uint64_t nvcc_size = nvcc_fatbin.empty() ? 0 : read(nvcc_fatbin).size();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (nvcc_size) std::printf("nvcc -Xfatbin -compress-all fatbin: %llu bytes\n\n", (unsigned long long)nvcc_size);
  std::printf("%-28s %-5s %12s %12s %9s %12s %12s\n", "package", "codec", "raw", "package", "vs nvcc", "GB/s 1 thr",
              ("GB/s " + std::to_string(cores) + " thr").c_str());
  for (const auto& path : packages) {
    const auto bytes = read(path);
    auto pv = package_view::parse(byte_span(bytes), path);
    if (!pv) {
      std::fprintf(stderr, "%s\n", pv.error().message.c_str());
      return 1;
    }
    std::uint64_t raw_total = 0;
    std::vector<double> t1_total(std::size_t(runs), 0), tn_total(std::size_t(runs), 0), hash_total(std::size_t(runs), 0);
    std::vector<std::uint8_t> out;
    for (const auto& e : pv->entries()) {
      raw_total += e.raw_size;
      out.resize(std::size_t(e.raw_size));
      for (int r = 0; r < runs; ++r) {
        for (unsigned threads : {1u, cores}) {
          const auto t0 = std::chrono::steady_clock::now();
          if (!pv->decompress_into(e.index, out.data(), threads)) return 1;
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          (threads == 1 ? t1_total : tn_total)[std::size_t(r)] += s;
        }
        // The raw XXH3 pass alone (part of the times above): what checking the decoded image costs.
        const auto h0 = std::chrono::steady_clock::now();
        volatile std::uint64_t sink = xxh3(byte_span(out.data(), out.size()));
        (void)sink;
        hash_total[std::size_t(r)] += std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count();
      }
    }
    const char* codec = codec_name(pv->entries().front().codec);
    char ratio[32] = "-";
    if (nvcc_size) std::snprintf(ratio, sizeof ratio, "%.3fx", double(bytes.size()) / double(nvcc_size));
    std::printf("%-28s %-5s %12llu %12zu %9s %12.2f %12.2f\n", path.substr(path.find_last_of('/') + 1).c_str(), codec,
                (unsigned long long)raw_total, bytes.size(), ratio, double(raw_total) / median(t1_total) / 1e9,
                double(raw_total) / median(tn_total) / 1e9);
    std::printf("    raw XXH3 pass: %.1f us (%.1f us per MB)\n", median(hash_total) * 1e6,
                median(hash_total) * 1e6 / (double(raw_total) / 1e6));
    for (const auto& e : pv->entries())
      std::printf("    entry %zu %-11s raw %10llu stored %10llu (%.3f)\n", e.index, e.target.str().c_str(),
                  (unsigned long long)e.raw_size, (unsigned long long)e.stored_size,
                  double(e.stored_size) / double(e.raw_size));
  }
  std::printf("\nDecompression includes the stored and raw XXH3 checks (as at load time); medians of %d runs.\n", runs);
  return 0;
}
