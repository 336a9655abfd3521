// NVIDIA's compatibility facts as data (docs/design.md §2, docs/selection.md). The selector asks these
// functions and never hard-codes an architecture: when NVIDIA adds a GPU, grows a family or ships a
// new PTX ISA, the change is a row here.
//
// Sources: `nvcc --list-gpu-code` (CUDA 13.0); CUDA Programming Guide Table 28 "Family-Specific
// Compatibility"; the PTX ISA release notes (ISA version <-> CUDA version).
#include "fatpack/core/arch_table.hpp"

#include <algorithm>
#include <iterator>

namespace fatpack::core {
namespace {

struct family_row {
  std::uint32_t family;                // 100 for sm_100f / compute_100f
  std::vector<std::uint32_t> members;  // compute capabilities it runs on, lowest first
};

// Table 28. NVIDIA's footnote: "Some families only contain a single member when they are created.
// They may be expanded in the future" (the 12.9 guide listed 100f as 10.0/10.3 only), so this is a
// table to update, not a rule to derive.
const std::vector<family_row>& families() {
  static const std::vector<family_row> table = {
      {100, {100, 103, 107}}, {103, {103, 107}}, {107, {107}}, {110, {110}}, {120, {120, 121}}, {121, {121}},
  };
  return table;
}

const family_row* find_family(std::uint32_t family_arch) {
  for (const auto& row : families())
    if (row.family == family_arch) return &row;
  return nullptr;
}

}  // namespace

const std::vector<std::uint32_t>& known_sass_archs() {
  // nvcc 13.0 --list-gpu-code (sm_50..sm_72 were dropped in CUDA 13; Thor is sm_110, not sm_101).
  static const std::vector<std::uint32_t> archs = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};
  return archs;
}

const std::vector<std::uint32_t>& hypothetical_archs() {
  // GPUs that do not exist yet: a next minor family (13.0) and a far-future major (20.0). The plan
  // matrix and the tests show that packages with PTX keep working on them.
  static const std::vector<std::uint32_t> archs = {130, 200};
  return archs;
}

bool is_tegra_arch(std::uint32_t arch) {
  static const std::uint32_t tegra[] = {32, 53, 62, 72, 87, 101, 110};
  return std::find(std::begin(tegra), std::end(tegra), arch) != std::end(tegra);
}

bool nvjitlink_knows_arch(int nvjitlink_version, std::uint32_t arch) {
  if (nvjitlink_version <= 0) return false;
  return nvjitlink_version > 13000 || is_known_arch(arch);
}

bool is_known_arch(std::uint32_t arch) {
  const auto& k = known_sass_archs();
  return std::find(k.begin(), k.end(), arch) != k.end();
}

std::vector<std::uint32_t> family_members(std::uint32_t family_arch) {
  if (const family_row* row = find_family(family_arch)) return row->members;
  // A family the table does not know (e.g. 130f from a newer toolkit): its own arch is the one
  // member we can be sure of. Wider membership needs a new row (and is a refusal until then, never
  // a wrong load).
  return {family_arch};
}

bool family_contains(std::uint32_t family_arch, std::uint32_t device_arch) {
  if (const family_row* row = find_family(family_arch))
    return std::find(row->members.begin(), row->members.end(), device_arch) != row->members.end();
  return family_arch == device_arch;
}

const std::vector<ptx_isa_row>& ptx_isa_table() {
  // Each ISA with the first CUDA release (and so driver) that accepts it. CUDA 12.6 brought no new
  // ISA (a 12.6 driver stays at 8.5); the PTX documentation pairs ISA 8.6 with CUDA 12.7.
  static const std::vector<ptx_isa_row> table = {
      {{5, 0}, 8000},  {{6, 0}, 9000},  {{6, 1}, 9010},  {{6, 2}, 9020},  {{6, 3}, 10000}, {{6, 4}, 10010},
      {{6, 5}, 10020}, {{7, 0}, 11000}, {{7, 1}, 11010}, {{7, 2}, 11020}, {{7, 3}, 11030}, {{7, 4}, 11040},
      {{7, 5}, 11050}, {{7, 6}, 11060}, {{7, 7}, 11070}, {{7, 8}, 11080}, {{8, 0}, 12000}, {{8, 1}, 12010},
      {{8, 2}, 12020}, {{8, 3}, 12030}, {{8, 4}, 12040}, {{8, 5}, 12050}, {{8, 6}, 12070}, {{8, 7}, 12080},
      {{8, 8}, 12090}, {{9, 0}, 13000}, {{9, 1}, 13010},
  };
  return table;
}

// ASSUMPTION for drivers newer than the table: since CUDA 13.0 the ISA has tracked the release as
// ISA (major - 4).minor (13.0 -> 9.0, 13.1 -> 9.1), so a CUDA 13.5 driver is taken to accept ISA 9.5
// and a CUDA 14.0 driver ISA 10.0. NVIDIA does not promise this (11.x/12.x had gaps and jumps). If
// it is wrong, the damage is bounded: the selector may rank a PTX the driver then refuses with
// CUDA_ERROR_UNSUPPORTED_PTX_VERSION, and the loader falls back to the next candidate. Add the real
// row when a new CUDA ships.
ptx_isa max_ptx_isa_for_driver(int cuda_version) {
  if (cuda_version <= 0) return {};
  const auto& table = ptx_isa_table();
  if (cuda_version > table.back().cuda_version && cuda_version >= 13000) {
    const int major = cuda_version / 1000, minor = cuda_version % 1000 / 10;
    return {std::uint16_t(major - 4), std::uint16_t(minor)};
  }
  ptx_isa best{};  // older than the table's first row: unknown
  for (const auto& row : table)
    if (row.cuda_version <= cuda_version) best = row.isa;
  return best;
}

int min_driver_for_ptx_isa(ptx_isa isa) {
  for (const auto& row : ptx_isa_table())
    if (isa <= row.isa) return row.cuda_version;
  // Newer than the table: the inverse of the extrapolation above (ISA 9.5 -> 13.5, 10.0 -> 14.0).
  return (isa.major + 4) * 1000 + isa.minor * 10;
}

}  // namespace fatpack::core
