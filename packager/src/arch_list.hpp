// CMake's CUDA_ARCHITECTURES syntax, as `fatpack build --arch` and the CMake macro accept it:
//   75-real      SASS sm_75            90-virtual   PTX compute_90
//   90           both                  90a-real     SASS sm_90a (a/f suffixes as nvcc spells them)
//   all          SASS for every arch `nvcc --list-gpu-code` prints + PTX for the highest X0 arch
//   all-major    SASS for the oldest and every X0 arch in that list + that PTX (as nvcc does)
// Items are separated by commas, semicolons or spaces.
#pragma once

#include "fatpack/core/error.hpp"
#include "fatpack/core/target.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace fatpack::tool {

// nvcc_archs: what the toolkit supports (`nvcc --list-gpu-code`, as 75, 80, ...). An arch outside it
// is an error naming the toolkit's list.
core::result<std::vector<core::target>> parse_arch_list(const std::string& list,
                                                        const std::vector<std::uint32_t>& nvcc_archs);

// Runs `nvcc --list-gpu-code` and parses it.
core::result<std::vector<std::uint32_t>> nvcc_gpu_codes(const std::string& nvcc);
// Runs `nvcc --version`: 13000 for "release 13.0"; 0 when unknown.
int nvcc_toolkit_version(const std::string& nvcc);

}  // namespace fatpack::tool
