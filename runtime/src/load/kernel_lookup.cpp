// Kernels by name in a loaded module or library (kernel_lookup.hpp).
#include "load/kernel_lookup.hpp"

#include <mutex>

namespace fatpack::detail {

namespace {

constexpr std::size_t k_max_echo = 200;  // of a caller's name, in a message

// The name as a message shows it: control bytes as '?', cut after k_max_echo bytes.
std::string printable(std::string_view name) {
  std::string out;
  const std::size_t n = name.size() < k_max_echo ? name.size() : k_max_echo;
  out.reserve(n + 32);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    out += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
  }
  if (n < name.size()) out += "... (" + std::to_string(name.size()) + " bytes)";
  return out;
}

}  // namespace

const std::vector<core::kernel_name>& kernel_names(const module_state& s) {
  std::call_once(s.names_once, [&] { s.names = core::describe_kernels(s.kernels); });
  return s.names;
}

std::string kernel_where(const module_state& s, std::string_view query) {
  return "kernel '" + printable(query) + "' in module '" + s.module_name + "' (package '" + s.package->name + "', " +
         s.report.target + ") on " + s.dev->identify() + ", driver " + s.drv->identify();
}

result<std::string> resolve_kernel(const module_state& s, std::string_view query) {
  // The exact symbol needs no demangling.
  for (const auto& k : s.kernels)
    if (k == query) return k;
  const auto& names = kernel_names(s);
  const core::kernel_match m = core::match_kernel(query, names);
  switch (m.what) {
    case core::kernel_match::outcome::found: return names.at(m.matches.front()).symbol;
    case core::kernel_match::outcome::bad_query:
      return error{errc::invalid_argument, 0, kernel_where(s, query) + ": " + m.problem, {}};
    case core::kernel_match::outcome::ambiguous:
      return error{errc::ambiguous, 0,
                   kernel_where(s, query) + ": ambiguous: " + std::to_string(m.matches.size()) +
                       " kernels have that name: " + core::list_kernels(names, m.matches, true) +
                       "; ask for one with its parameter list or by its mangled name",
                   {}};
    case core::kernel_match::outcome::not_found: break;
  }
  // CUDA_ERROR_NOT_FOUND as the CUDA status: what the driver says for a name it does not know.
  return error{errc::not_found, CUDA_ERROR_NOT_FOUND,
               kernel_where(s, query) + ": the module has no kernel of that name; it has: " +
                   core::list_kernels(names, false),
               {}};
}

}  // namespace fatpack::detail
