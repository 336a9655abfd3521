#include "arch_list.hpp"

#include "process.hpp"

#include <algorithm>
#include <regex>
#include <sstream>

namespace fatpack::tool {
namespace {

std::string list_str(const std::vector<std::uint32_t>& archs) {
  std::string s;
  for (auto a : archs) s += (s.empty() ? "" : ", ") + std::to_string(a);
  return s;
}

void add_unique(std::vector<core::target>& out, const core::target& t) {
  if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
}

}  // namespace

core::result<std::vector<core::target>> parse_arch_list(const std::string& list,
                                                        const std::vector<std::uint32_t>& nvcc_archs) {
  std::vector<core::target> out;
  std::string item;
  std::stringstream ss(list);
  std::vector<std::string> items;
  for (char c : list) {
    if (c == ',' || c == ';' || c == ' ' || c == '\t') {
      if (!item.empty()) items.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  if (!item.empty()) items.push_back(item);
  if (items.empty()) return core::make_error(core::errc::invalid_argument, "empty architecture list");
  if (nvcc_archs.empty()) return core::make_error(core::errc::invalid_argument, "nvcc reported no architectures");
  // Like nvcc -arch=all / all-major: PTX for the highest X0 architecture (compute_120, not 121),
  // and all-major includes the oldest architecture even when it is not an X0 one (sm_75).
  std::uint32_t highest_major = 0;
  for (auto a : nvcc_archs)
    if (a % 10 == 0) highest_major = std::max(highest_major, a);
  if (highest_major == 0) highest_major = *std::max_element(nvcc_archs.begin(), nvcc_archs.end());
  const std::uint32_t lowest = *std::min_element(nvcc_archs.begin(), nvcc_archs.end());

  static const std::regex item_re(R"(^([0-9]+)([af]?)(-real|-virtual)?$)");
  for (const auto& it : items) {
    if (it == "all" || it == "all-major") {
      std::vector<std::uint32_t> sorted = nvcc_archs;
      std::sort(sorted.begin(), sorted.end());
      for (auto a : sorted)
        if (it == "all" || a % 10 == 0 || a == lowest) add_unique(out, {core::entry_kind::sass, a, core::arch_variant::plain});
      add_unique(out, {core::entry_kind::ptx, highest_major, core::arch_variant::plain});
      continue;
    }
    if (it == "native")
      return core::make_error(core::errc::invalid_argument,
                              "'native' is not supported: fatpack builds for GPUs other than the build machine's; "
                              "name the architectures (e.g. 75-real,90-real,120-virtual)");
    std::smatch m;
    if (!std::regex_match(it, m, item_re))
      return core::make_error(core::errc::invalid_argument,
                              "invalid architecture '" + it +
                                  "' (expected e.g. 90, 90-real, 120-virtual, 90a-real, 100f, all, all-major)");
    const std::uint32_t arch = std::uint32_t(std::stoul(m[1].str().substr(0, 6)));
    if (std::find(nvcc_archs.begin(), nvcc_archs.end(), arch) == nvcc_archs.end())
      return core::make_error(core::errc::invalid_argument,
                              "architecture " + std::to_string(arch) + " ('" + it +
                                  "') is not supported by this CUDA toolkit (nvcc --list-gpu-code: " +
                                  list_str(nvcc_archs) + ")");
    // The number and suffix are nvcc's target spelling without the prefix: one parser for both.
    auto sass = core::target::parse("sm_" + m[1].str() + m[2].str());
    if (!sass) return core::make_error(core::errc::invalid_argument, "architecture '" + it + "': " + sass.error().message);
    const core::arch_variant variant = sass->variant;
    const bool real = m[3] != "-virtual", virt = m[3] != "-real";
    if (real) add_unique(out, {core::entry_kind::sass, arch, variant});
    if (virt) add_unique(out, {core::entry_kind::ptx, arch, variant});
  }
  return out;
}

core::result<std::vector<std::uint32_t>> nvcc_gpu_codes(const std::string& nvcc) {
  const process_result r = run_process({nvcc, "--list-gpu-code"});
  if (r.exit_code != 0)
    return core::make_error(core::errc::io, r.start_error.empty() ? "'" + nvcc + " --list-gpu-code' failed: " + r.output
                                                                  : r.start_error);
  std::vector<std::uint32_t> archs;
  static const std::regex line_re(R"(sm_([0-9]+)\s*)");
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, line_re)) archs.push_back(std::uint32_t(std::stoul(m[1])));
  }
  if (archs.empty()) return core::make_error(core::errc::io, "'" + nvcc + " --list-gpu-code' printed no architectures");
  return archs;
}

int nvcc_toolkit_version(const std::string& nvcc) {
  const process_result r = run_process({nvcc, "--version"});
  static const std::regex re(R"(release ([0-9]+)\.([0-9]+))");
  std::smatch m;
  if (r.exit_code != 0 || !std::regex_search(r.output, m, re)) return 0;
  return std::stoi(m[1]) * 1000 + std::stoi(m[2]) * 10;
}

}  // namespace fatpack::tool
