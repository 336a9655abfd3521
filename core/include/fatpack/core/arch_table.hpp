// NVIDIA's compatibility facts as data (docs/design.md §2): which architectures the toolkit knows,
// which devices a family target runs on, which PTX ISA each driver accepts. Keep new facts here,
// not as `if`s in the selector.
#pragma once

#include "fatpack/core/target.hpp"

#include <cstdint>
#include <vector>

namespace fatpack::core {

// Architectures (major*10+minor) nvcc 13.0 can compile SASS for (nvcc --list-gpu-code).
const std::vector<std::uint32_t>& known_sass_archs();
// Hypothetical future devices the plan matrix also shows (sm_130, sm_200).
const std::vector<std::uint32_t>& hypothetical_archs();
// True when arch is in known_sass_archs().
bool is_known_arch(std::uint32_t arch);

// Whether an nvJitLink of this version (nvJitLinkVersion() as major*1000+minor*10) can link for a
// device of CC `arch`. 13.0 targets what nvcc 13.0 does (known_sass_archs(); it answers
// NVJITLINK_ERROR_UNRECOGNIZED_ARCH for sm_130). A newer library is assumed to know the device (this
// table cannot list its archs); the runtime falls back to the next candidate when it does not.
bool nvjitlink_knows_arch(int nvjitlink_version, std::uint32_t arch);

// Tegra / Jetson architectures (3.2, 5.3, 6.2, 7.2, 8.7, 10.1, 11.0): integrated GPUs without SASS
// minor-version compatibility. The runtime asks the device itself; `fatpack warm --target`, which has
// no device of that CC, asks this.
bool is_tegra_arch(std::uint32_t arch);

// Family targets: does an `f` target for `family_arch` (100 for sm_100f) run on a device with
// compute capability `device_arch` (103 for CC 10.3)? From the Programming Guide's Table 28.
bool family_contains(std::uint32_t family_arch, std::uint32_t device_arch);
// The devices an `f` target for `family_arch` runs on, lowest first ({100, 103, 107} for 100). A
// family the table does not know yields just {family_arch}.
std::vector<std::uint32_t> family_members(std::uint32_t family_arch);

// Highest PTX ISA a driver of this CUDA version accepts (13000 -> 9.0). For drivers newer than
// the table knows, the rule ISA 9.x <-> CUDA 13.x is extended; version 0 (unknown) returns {0,0}.
ptx_isa max_ptx_isa_for_driver(int cuda_version);
// Lowest CUDA (driver) version that accepts this PTX ISA (9.0 -> 13000).
int min_driver_for_ptx_isa(ptx_isa isa);

// NVIDIA's table itself (PTX ISA release notes), oldest first: each ISA with the first CUDA
// version that accepts it. For docs and tests; the functions above are what code should use.
struct ptx_isa_row {
  ptx_isa isa;
  int cuda_version;
};
const std::vector<ptx_isa_row>& ptx_isa_table();

}  // namespace fatpack::core
