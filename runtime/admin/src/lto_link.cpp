// Build-time LTO-IR link (see fatpack/admin/lto_link.hpp): the runtime's nvjitlink_compile, so the
// build links exactly as the load-time path does.
#include "fatpack/admin/lto_link.hpp"

#include "jit/nvjitlink.hpp"

#include "fatpack/core/jit_options.hpp"
#include "fatpack/core/target.hpp"

namespace fatpack::detail::lto {

result<linked> link_ltoir(const std::vector<std::vector<std::uint8_t>>& parts, const std::string& sm_target,
                          const std::string& ptxas_options, const std::string& name) {
  auto t = core::target::parse(sm_target);
  if (!t || t->kind != core::entry_kind::sass)
    return error{errc::invalid_argument, 0, name + ": '" + sm_target + "' is not an sm_XY target", {}};
  const auto& lib = load_nvjitlink();
  if (!lib) return lib.error();
  std::vector<core::byte_span> spans;
  spans.reserve(parts.size());
  for (const auto& p : parts) spans.emplace_back(p.data(), p.size());
  bool arch_unknown = false;
  auto out = nvjitlink_compile(**lib, spans, name, parse_jit_options(ptxas_options), t->arch, t->variant, arch_unknown,
                               true);
  if (!out) return out.error();
  linked l;
  l.cubin = std::move(out->sass);
  l.linker = (*lib)->identify();
  l.info_log = std::move(out->info_log);
  return l;
}

}  // namespace fatpack::detail::lto
