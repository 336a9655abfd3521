// libFuzzer target: kernels by name (core/src/inputs/kernel_names.cpp, demangle.cpp), which read a
// caller's query and a package's symbols. Input: the query, then one symbol per line. Besides not
// crashing, hanging or allocating without bound (the demangling bound: a back-reference bomb is a
// timeout or an out-of-memory finding), the answers must be consistent: an exact symbol is found as
// itself, and every match is an index of the list.
#include "fatpack/core/kernel_names.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace core = fatpack::core;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nl = all.find('\n');
  const std::string_view query = all.substr(0, nl);
  std::vector<std::string> symbols;
  for (std::size_t pos = nl; pos != std::string_view::npos && pos < all.size();) {
    const std::size_t next = all.find('\n', pos + 1);
    symbols.emplace_back(all.substr(pos + 1, next == std::string_view::npos ? std::string_view::npos : next - pos - 1));
    pos = next;
  }
  const auto kernels = core::describe_kernels(symbols);
  const core::kernel_match m = core::match_kernel(query, kernels);
  for (std::size_t i : m.matches)
    if (i >= kernels.size()) __builtin_trap();
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    if (kernels[i].symbol != query || query.empty()) continue;
    if (m.what != core::kernel_match::outcome::found || kernels[m.matches.at(0)].symbol != query) __builtin_trap();
    break;
  }
  (void)core::list_kernels(kernels, m.matches, true);
  (void)core::describe_kernel(query);  // the query as a symbol: arbitrary bytes through the demangling bound
  return 0;
}
