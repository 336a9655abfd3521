// fatpack_suite's report: the markdown section of docs/benchmarks.md from the raw samples of one or
// more runs (each `run` call on the GPU machine writes one TSV). Lines of a TSV:
//   M key value                   metadata (date, gpu, driver, host, command, page_cache, stopped)
//   S case run ms jits cpu_s each one sample (each: every process's own time, ms)
//   P case ms jits                the process that primed a hit case's cache
//   X case reason                 a case that could not run here
//   F case run                    a run that failed (its output went to stderr)
//   K path kernels geomean within bitwise max_rel sum_ms compared   kernel speed per JIT path
#include "suite.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace suite {
namespace {

struct sample {
  double ms = 0, cpu_s = 0;
  long long jits = -1;
  std::vector<double> each;
};

struct data {
  std::vector<std::map<std::string, std::string>> meta;  // one per file
  std::map<std::string, std::vector<sample>> samples;
  std::map<std::string, std::string> primes, skips;
  std::map<std::string, int> failures;
  std::vector<std::vector<std::string>> speed;
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> f;
  std::size_t p = 0;
  for (;;) {
    const auto q = line.find('\t', p);
    f.push_back(line.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) return f;
    p = q + 1;
  }
}

double to_d(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string fmt_time(double ms) {
  char b[64];
  if (ms >= 1000) std::snprintf(b, sizeof b, "%.2f s", ms / 1000);
  else std::snprintf(b, sizeof b, "%.3f ms", ms);
  return b;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

bool load(const std::string& path, data& d, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read " + path;
    return false;
  }
  d.meta.emplace_back();
  std::string line;
  while (std::getline(in, line)) {
    const auto f = split_tabs(line);
    if (f[0] == "M" && f.size() >= 3) d.meta.back()[f[1]] = f[2];
    else if (f[0] == "S" && f.size() >= 7) {
      sample s;
      s.ms = to_d(f[3]);
      s.jits = std::strtoll(f[4].c_str(), nullptr, 10);
      s.cpu_s = to_d(f[5]);
      std::stringstream each(f[6]);
      for (std::string v; std::getline(each, v, ',');) s.each.push_back(to_d(v));
      d.samples[f[1]].push_back(s);
    } else if (f[0] == "P" && f.size() >= 3) d.primes[f[1]] = f[2];
    else if (f[0] == "X" && f.size() >= 3) d.skips[f[1]] = f[2];
    else if (f[0] == "F" && f.size() >= 2) d.failures[f[1]]++;
    else if (f[0] == "K" && f.size() >= 9) d.speed.push_back(f);
  }
  return true;
}

std::string runs_cell(const case_def& c, std::size_t n) {
  const std::size_t want = c.w == weight::fast ? 15 : 3;
  return std::to_string(n) + (n < want ? " *" : "");
}

std::string no_data(const data& d, const case_def& c) {
  if (d.skips.count(c.id)) return d.skips.at(c.id);
  if (d.failures.count(c.id)) return "failed (" + std::to_string(d.failures.at(c.id)) + " runs; see the run's stderr)";
  return "not run";
}

std::string ratio(const data& d, const case_def& c, double med) {
  if (c.baseline.empty() || !d.samples.count(c.baseline)) return "";
  std::vector<double> b;
  for (const auto& s : d.samples.at(c.baseline)) b.push_back(s.ms);
  const double base = median(b);
  if (base <= 0) return "";
  return fmt(med / base >= 10 ? "%.1fx" : "%.2fx", med / base) + " `" + c.baseline + "`";
}

// The child's user + system time (wait4: the whole process, its start and exit included) and how
// many cores that keeps busy over the clocked time: for a JIT case, how far from every core it ran.
// Only for cases over 100 ms, where the process's start and exit are a small part of it.
std::string cpu_cell(double cpu_s, double wall_ms) {
  if (wall_ms < 100 || cpu_s <= 0) return "";
  return fmt("%.2f s", cpu_s) + fmt(" (%.1f)", cpu_s * 1000 / wall_ms);
}

void table(std::string& md, const data& d, const std::string& group) {
  md += "| case | what | runs | median | min - max | vs | fatpack JITs | CPU time (cores busy) |\n"
        "|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : cases()) {
    if (c.group != group) continue;
    if (!d.samples.count(c.id)) {
      md += "| `" + c.id + "` | " + c.what + " | 0 | " + no_data(d, c) + " | | | | |\n";
      continue;
    }
    std::vector<double> ms, jits, cpu;
    for (const auto& s : d.samples.at(c.id)) {
      ms.push_back(s.ms);
      cpu.push_back(s.cpu_s);
      if (s.jits >= 0) jits.push_back(double(s.jits));
    }
    const double med = median(ms);
    const auto [lo, hi] = std::minmax_element(ms.begin(), ms.end());
    // A fatpack case's compiles (cache_stats().jits, median): 0 for SASS and hits, else how many ran.
    md += "| `" + c.id + "` | " + c.what + " | " + runs_cell(c, ms.size()) + " | " + fmt_time(med) + " | " +
          fmt_time(*lo) + " - " + fmt_time(*hi) + " | " + ratio(d, c, med) + " | " +
          (jits.empty() ? "" : fmt("%.0f", median(jits))) + " | " + cpu_cell(median(cpu), med) + " |\n";
  }
}

void procs_table(std::string& md, const data& d) {
  md += "| case | processes | who | runs | wall (median) | JITs | CPU time summed | per process, last run | vs |\n"
        "|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : cases()) {
    if (c.group != "procs") continue;
    const std::string head = "| `" + c.id + "` | " + std::to_string(c.processes) + " | " + c.what + " | ";
    if (!d.samples.count(c.id)) {
      md += head + "0 | " + no_data(d, c) + " | | | | |\n";
      continue;
    }
    const auto& ss = d.samples.at(c.id);
    std::vector<double> wall, cpu, jits;
    for (const auto& s : ss) {
      wall.push_back(s.ms);
      cpu.push_back(s.cpu_s);
      if (s.jits >= 0) {
        jits.push_back(double(s.jits));
      } else {  // the driver: a process that took over 1/5 of the slowest one's time compiled
        const double slowest = s.each.empty() ? 0 : *std::max_element(s.each.begin(), s.each.end());
        jits.push_back(double(std::count_if(s.each.begin(), s.each.end(), [&](double v) { return v > slowest / 5; })));
      }
    }
    std::string each;
    for (double v : ss.back().each) each += (each.empty() ? "" : ", ") + fmt(v < 10 ? "%.1f" : "%.0f", v);
    const double med = median(wall);
    md += head + runs_cell(c, ss.size()) + " | " + fmt_time(med) + " | " + fmt("%.0f", median(jits)) +
          (c.fatpack_side ? "" : " (inferred)") + " | " + fmt("%.2f s", median(cpu)) + " | " + each + " | " +
          ratio(d, c, med) + " |\n";
  }
}

void speed_table(std::string& md, const data& d) {
  const case_def* c = find_case("speed");
  if (d.speed.empty()) {
    md += c ? "Kernel speed: " + no_data(d, *c) + ".\n" : "";
    return;
  }
  md += "| JIT path | kernels | kernel time vs SASS (geomean) | results within 1e-3 (relative) of SASS | bitwise equal | "
        "largest relative difference | sum of kernel medians |\n|---|---|---|---|---|---|---|\n";
  for (const auto& k : d.speed)
    md += "| " + k[1] + " | " + k[2] + " | " + fmt("%.4f", to_d(k[3])) + " | " + k[4] + " of " + k[8] + " | " + k[5] +
          " of " + k[8] + " | " + fmt("%.2g", to_d(k[6])) + " | " + fmt("%.3f ms", to_d(k[7])) + " |\n";
  md += "\nResults are compared where the block held the kernel's whole shared-memory tile (else it reads unwritten "
        "shared memory); kernels use fast-math `__sinf`/FMA, so JIT paths may differ in the last bits.\n";
}

}  // namespace

std::string render(const std::vector<std::string>& files, std::string& error) {
  data d;
  for (const auto& f : files)
    if (!load(f, d, error)) return "";
  std::string gpu, driver, host;
  for (const auto& m : d.meta) {
    if (gpu.empty() && m.count("gpu")) gpu = m.at("gpu");
    if (driver.empty() && m.count("driver")) driver = m.at("driver");
    if (host.empty() && m.count("host")) host = m.at("host");
  }
  std::string md = "## Benchmark suite (`fatpack_suite`)\n\n";
  md += "GPU: " + gpu + "; driver " + driver + "; " + host +
        ". Made by `bench/run_suite.sh` (inputs: `bench/make_suite_inputs.sh`, from `bench/gen_kernels.py`). "
        "Every run of every case is a fresh process with a fresh cache directory (the hit cases: a directory "
        "primed by one process of their own); the clock starts after the primary context exists and stops when "
        "every kernel asked for can be launched (`cuModuleGetFunction` / fatpack's `function()` returned); input "
        "files are read before it. Cases are interleaved round by round. `CUDA_CACHE_DISABLE=1` everywhere except "
        "the driver's cache-hit and N-process cases. Medians; ratios against the case named.\n\n";
  for (const auto& m : d.meta) {
    auto get = [&](const char* k) { return m.count(k) ? m.at(k) : std::string("?"); };
    md += "- " + get("date") + ": `" + get("command") + "`; page cache: " + get("page_cache") +
          (m.count("stopped") ? "; **stopped early** " + m.at("stopped") : "") + "\n";
  }
  md += "\n";
  const std::vector<std::pair<std::string, std::string>> groups = {
      {"mid", "mid module (40 kernels; 1.0 MB sm_90 cubin, 1.8 MB compute_90 PTX), every kernel looked up"},
      {"big", "big module (400 kernels, one module, compute_90 PTX)"},
      {"many", "16 modules of 50 kernels (compute_80 PTX)"}};
  for (const auto& [g, title] : groups) {
    md += "### " + title + "\n\n";
    table(md, d, g);
    md += "\n";
  }
  std::string primes;
  for (const auto& [id, ms] : d.primes) primes += (primes.empty() ? "" : "; ") + ("`" + id + "` " + fmt_time(to_d(ms)));
  if (!primes.empty()) md += "Priming processes (a cold JIT each, not in the table): " + primes + ".\n\n";
  md += "### N processes starting together (mid PTX, every process loads it)\n\n";
  procs_table(md, d);
  md += "\nJITs: fatpack counts its own compiles (`cache_stats().jits`, summed); the driver's are inferred (processes "
        "that took over 1/5 of the slowest one's time). CPU time: user + system of every process (`wait4`).\n\n";
  md += "### Kernel speed per JIT path (mid, 40 kernels, median of 10 timed launches each, `cuEvent`)\n\n";
  speed_table(md, d);
  md += "\n\\* fewer runs than the suite's default (15 for cases under a second, 3 for JITs): set by `--runs` or "
        "cut by `--deadline-s`.\n";
  return md;
}

}  // namespace suite
