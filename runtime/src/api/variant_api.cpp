// Which code was loaded (loaded_code::variant): derived from the load report's entry and the
// device, never stored a second time.
#include "api/kernel_binding.hpp"

#include "fatpack/fatpack.hpp"

namespace fatpack {

namespace {

code_variant variant_of(const detail::module_state& s) {
  code_variant v;
  const load_report& rep = s.report;
  const auto& entries = s.package->view.entries();
  if (!rep.loaded || rep.entry >= entries.size()) return v;
  const core::target& t = entries[rep.entry].target;
  v.target = t.str();
  v.arch = t.arch;
  v.device_arch = s.dev->arch;
  if (t.kind != core::entry_kind::sass) {
    v.kind = variant_kind::ptx_jit;
    v.ptx_isa = entries[rep.entry].ptx_isa.known() ? entries[rep.entry].ptx_isa.str() : std::string();
  } else if (t.variant == core::arch_variant::arch_specific) {
    v.kind = variant_kind::arch_specific_sass;
  } else if (t.variant == core::arch_variant::family) {
    v.kind = variant_kind::family_sass;
  } else {
    v.kind = t.arch == s.dev->arch ? variant_kind::exact_sass : variant_kind::lower_minor_sass;
  }
  return v;
}

}  // namespace

const char* variant_kind_name(variant_kind k) noexcept {
  switch (k) {
    case variant_kind::none: return "none";
    case variant_kind::exact_sass: return "exact SASS";
    case variant_kind::lower_minor_sass: return "lower-minor SASS";
    case variant_kind::arch_specific_sass: return "arch-specific SASS";
    case variant_kind::family_sass: return "family SASS";
    case variant_kind::ptx_jit: return "PTX through the JIT";
  }
  return "unknown";
}

code_variant loaded_code::variant() const { return state_ ? variant_of(*state_) : code_variant{}; }

result<code_variant> module::variant(std::string_view kernel) const {
  auto f = function(kernel);
  if (!f) return std::move(f).error();
  return variant_of(*state_);
}

result<code_variant> library::variant(std::string_view name) const {
  auto k = kernel(name);
  if (!k) return std::move(k).error();
  return variant_of(*state_);
}

namespace detail {
code_variant binding_variant(const kernel_binding& k) { return variant_of(*k.state); }
}  // namespace detail

}  // namespace fatpack
