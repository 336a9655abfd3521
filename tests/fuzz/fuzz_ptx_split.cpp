// libFuzzer target: the PTX module splitter (core/ptx_split.hpp), which takes PTX nobody checked
// (fatpack split-ptx; later packing and add_image). Both granularities; small limits so that the
// bounded refusals are reached too. Whatever it returns must keep its promises: at least one piece,
// and a module that is not split comes back as its own text.
#include "fatpack/core/ptx_split.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using fatpack::core::ptx_split_options;
  const fatpack::core::byte_span bytes(data, size);
  ptx_split_options per_kernel;
  per_kernel.max_walk_steps = 1 << 16;
  ptx_split_options groups;
  groups.mode = ptx_split_options::granularity::groups;
  groups.groups = 1 + size % 4;
  groups.max_output_factor = 2;
  for (const ptx_split_options& o : {per_kernel, groups}) {
    auto r = fatpack::core::split_ptx(bytes, "fuzz", o);
    if (!r) continue;
    if (r->pieces.empty()) std::abort();
    if (!r->unsplit_reason.empty() && r->pieces.size() != 1) std::abort();
  }
  return 0;
}
