// libFuzzer target: the recorded ptxas options (an entry's `options` field, from a package nobody
// checked) as the JIT reads them, and nvcc arguments as `fatpack build` and `pack` record them.
// Beyond not crashing: whatever is applied is in range, and the canonical text of the applied
// options reads back as exactly those options (it is what the JIT key holds).
#include "fatpack/core/jit_options.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

void check(const fatpack::core::jit_options& o) {
  if (o.optimization_level < -1 || o.optimization_level > fatpack::core::max_optimization_level) std::abort();
  if (o.max_registers < 0 || o.max_registers > fatpack::core::max_register_limit) std::abort();
  const std::string canon = o.canonical();
  const auto again = fatpack::core::parse_jit_options(canon);
  if (again.canonical() != canon || !again.ignored.empty() || !again.invalid.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check(fatpack::core::parse_jit_options(text));
  // The same bytes as an argument vector (NUL-separated), as `fatpack build -- ...` gets it.
  std::vector<std::string> args;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == 0) {
      args.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  const auto recorded = fatpack::core::ptxas_options_from_nvcc(args);
  check(fatpack::core::parse_jit_options(recorded.text));
  return 0;
}
