// NVIDIA's compatibility facts as data (design.md §2). Sources: nvcc 13.0 --list-gpu-code; CUDA
// Programming Guide Table 28 "Family-Specific Compatibility"; cuda-python's PTX ISA table.
#include "fatpack/core/arch_table.hpp"

#include <algorithm>
#include <utility>

namespace fatpack::core {
namespace {

// family target -> member compute capabilities. NVIDIA says families may grow: update here.
const std::vector<std::pair<std::uint32_t, std::vector<std::uint32_t>>>& families() {
  static const std::vector<std::pair<std::uint32_t, std::vector<std::uint32_t>>> table = {
      {100, {100, 103, 107}}, {103, {103, 107}}, {107, {107}}, {110, {110}}, {120, {120, 121}}, {121, {121}},
  };
  return table;
}

// PTX ISA -> the first CUDA version whose driver accepts it.
struct isa_row {
  ptx_isa isa;
  int cuda;
};
const std::vector<isa_row>& isa_table() {
  static const std::vector<isa_row> table = {
      {{7, 0}, 11000}, {{7, 1}, 11010}, {{7, 2}, 11020}, {{7, 3}, 11030}, {{7, 4}, 11040}, {{7, 5}, 11050},
      {{7, 6}, 11060}, {{7, 7}, 11070}, {{7, 8}, 11080}, {{8, 0}, 12000}, {{8, 1}, 12010}, {{8, 2}, 12020},
      {{8, 3}, 12030}, {{8, 4}, 12040}, {{8, 5}, 12050}, {{8, 6}, 12070}, {{8, 7}, 12080}, {{8, 8}, 12090},
      {{9, 0}, 13000}, {{9, 1}, 13010},
  };
  return table;
}

}  // namespace

const std::vector<std::uint32_t>& known_sass_archs() {
  static const std::vector<std::uint32_t> archs = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
  return archs;
}

const std::vector<std::uint32_t>& hypothetical_archs() {
  static const std::vector<std::uint32_t> archs = {130, 200};
  return archs;
}

bool is_known_arch(std::uint32_t arch) {
  const auto& k = known_sass_archs();
  return std::find(k.begin(), k.end(), arch) != k.end();
}

bool family_contains(std::uint32_t family_arch, std::uint32_t device_arch) {
  for (const auto& [fam, members] : families())
    if (fam == family_arch) return std::find(members.begin(), members.end(), device_arch) != members.end();
  // A family the table does not know (e.g. 130f): assume only its own arch until NVIDIA says more.
  return family_arch == device_arch;
}

ptx_isa max_ptx_isa_for_driver(int cuda_version) {
  if (cuda_version <= 0) return {};
  ptx_isa best{};
  for (const auto& row : isa_table())
    if (row.cuda <= cuda_version) best = row.isa;
  // Drivers newer than the table: assume NVIDIA keeps ISA 9.x <-> CUDA 13.x (major - 4, same minor).
  // The loader still falls back when a driver refuses with CUDA_ERROR_UNSUPPORTED_PTX_VERSION.
  if (cuda_version > isa_table().back().cuda) {
    const int major = cuda_version / 1000, minor = cuda_version % 1000 / 10;
    best = {std::uint16_t(major - 4), std::uint16_t(minor)};
  }
  return best;
}

int min_driver_for_ptx_isa(ptx_isa isa) {
  for (const auto& row : isa_table())
    if (!(row.isa < isa)) return row.cuda;
  // Newer than the table: the same extrapolation as above.
  return (isa.major + 4) * 1000 + isa.minor * 10;
}

}  // namespace fatpack::core
