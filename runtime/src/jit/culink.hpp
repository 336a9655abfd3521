// PTX -> SASS bytes through the driver's own JIT: cuLinkCreate / cuLinkAddData(PTX) / cuLinkComplete.
//
// Why cuLink and not cuModuleLoadData(PTX): it is the only driver API that hands the produced cubin
// back (so it can be cached, issue 4), the driver knows GPUs newer than our toolkit, its kernels are
// as fast, and it scales across threads where module-load JIT is serialised inside a process
// (docs/benchmarks.md). The caller makes the device's context current (the JIT targets it) unless a
// target is given explicitly (CU_JIT_TARGET, cross-compiling for another CC).
//
// Both logs are captured: the info log is returned with the bytes, the error log becomes error::log.
#pragma once

#include "platform/driver.hpp"

#include "fatpack/core/error.hpp"
#include "fatpack/core/jit_options.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fatpack::detail {

// The options an entry records, parsed (fatpack/core/jit_options.hpp): the JIT applies the four it
// can, and names the others in its info log (they are never dropped without a word).
using core::jit_options;
using core::parse_jit_options;

struct jit_output {
  std::vector<std::uint8_t> sass;  // the cubin
  std::string info_log;
  double wall_ms = 0;              // measured around cuLinkAddData + cuLinkComplete
};

// Compiles NUL-terminated PTX (`ptx` includes the terminating NUL). `name` appears in the driver's
// log and in errors ("vadd: compute_80 (PTX ISA 9.0)"). `target` is a CUjit_target value
// for CU_JIT_TARGET (90, or 0x10000 + 90 for sm_90a); nullopt targets the current context's device.
result<jit_output> jit_link(const driver& d, core::byte_span ptx, std::string_view name, const jit_options& opts,
                             std::optional<std::uint32_t> target);
// The same for a link group (docs/format.md §4.1): every part (each NUL-terminated) goes in with its
// own cuLinkAddData, named "<name> part <k>", and cuLinkComplete resolves the calls between them.
result<jit_output> jit_link(const driver& d, const std::vector<core::byte_span>& ptx_parts, std::string_view name,
                            const jit_options& opts, std::optional<std::uint32_t> target);

}  // namespace fatpack::detail
