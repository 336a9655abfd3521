// fatpack doctor: what a user runs when a program starts slowly or fails: the driver and its PTX
// ISA limit, the devices, the cache (mode, limit, layers, sizes) and, for the packages a PROGRAM
// embeds (found as `inspect` finds them), what each device would load, whether the cache already has
// the SASS of a PTX entry, and what would be JIT-compiled at the first load. Every answer comes from
// the runtime's own code through fatpack_cache_admin (doctor.hpp); nothing is written or compiled.
#include "json_out.hpp"
#include "tool.hpp"

#include "fatpack/admin/doctor.hpp"
#include "fatpack/core/arch_table.hpp"
#include "fatpack/core/hex.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

namespace fatpack::tool {
namespace {

namespace fd = fatpack::detail::doctor;

struct doctor_args {
  std::vector<std::string> programs;
  bool json = false;
};

nlohmann::json to_json(const fd::report& r) {
  nlohmann::json doc;
  doc["schema_version"] = 1;
  const auto& d = r.driver;
  doc["driver"] = {{"library", d.library}, {"loaded", d.loaded}, {"error", d.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.error)},
                   {"version", d.loaded ? nlohmann::json(d.version_text) : nlohmann::json(nullptr)},
                   {"max_ptx_isa", d.loaded ? nlohmann::json(d.max_ptx_isa) : nlohmann::json(nullptr)},
                   {"cache_identity", d.loaded ? nlohmann::json(d.cache_identity) : nlohmann::json(nullptr)}};
  doc["devices"] = nlohmann::json::array();
  for (const auto& v : r.devices)
    doc["devices"].push_back({{"ordinal", v.ordinal}, {"name", v.name}, {"device", core::sm_name(v.arch)},
                              {"compute_capability", core::cc_str(v.arch)}, {"tegra", v.tegra}, {"uuid", v.uuid}});
  doc["policy"] = r.policy;
  nlohmann::json c = {{"mode", r.cache.mode}, {"why", r.cache.why}, {"max_bytes", r.cache.max_bytes},
                      {"use_other_driver", r.cache.use_other_driver}, {"warnings", r.cache.warnings}};
  c["layers"] = nlohmann::json::array();
  for (const auto& l : r.cache.layers)
    c["layers"].push_back({{"role", l.role}, {"path", l.path}, {"state", l.state}, {"problem", l.problem},
                           {"entries", l.entries}, {"bytes", l.bytes}, {"cubin_bytes", l.cubin_bytes},
                           {"temp_files", l.temp_files}, {"index_ok", l.index_ok}});
  doc["cache"] = c;
  doc["packages"] = nlohmann::json::array();
  for (const auto& p : r.packages)
    doc["packages"].push_back({{"name", p.name}, {"source", p.source}, {"entries", p.entries}, {"modules", p.modules},
                               {"targets", p.targets}});
  doc["package_errors"] = r.package_errors;
  doc["loads"] = nlohmann::json::array();
  for (const auto& m : r.modules) {
    nlohmann::json j = {{"package", m.package}, {"module", m.module}, {"device", m.device},
                        {"compute_capability", core::cc_str(m.arch)}, {"fits", m.fits}, {"reason", m.reason}};
    j["loads"] = m.fits ? nlohmann::json(m.loads) : nlohmann::json(nullptr);
    j["fallbacks"] = m.fallbacks;
    j["jit"] = m.jit;
    j["cache"] = m.jit ? nlohmann::json(m.cache) : nlohmann::json(nullptr);
    j["cache_layer"] = m.cache_layer.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.cache_layer);
    j["jit_path"] = m.jit ? nlohmann::json(m.jit_path) : nlohmann::json(nullptr);
    j["code_key"] = m.jit ? nlohmann::json(m.code_key) : nlohmann::json(nullptr);
    j["pieces"] = m.pieces;
    j["pieces_cached"] = m.pieces_cached;
    doc["loads"].push_back(j);
  }
  return doc;
}

std::string cache_words(const fd::module_report& m) {
  const std::string pieces = m.pieces ? " (in " + std::to_string(m.pieces) + " pieces)" : std::string();
  if (m.cache == "partial")
    return std::to_string(m.pieces_cached) + " of " + std::to_string(m.pieces) + " pieces in the cache (" +
           m.cache_layer + "): the others JIT-compiled at the first load (" + m.jit_path + ")";
  if (!pieces.empty() && m.cache == "miss") return "not in the cache: JIT at the first load" + pieces + " (" + m.jit_path + ")";
  if (m.cache == "hit") return "SASS in the cache (" + m.cache_layer + "): no JIT";
  if (m.cache == "other-driver")
    return "SASS of another driver in the cache (" + m.cache_layer + "): used at once, re-JIT-ed for this driver in the background";
  if (m.cache == "disabled") return "JIT at every start (the disk cache is disabled)";
  return "not in the cache: JIT at the first load (" + m.jit_path + ")";
}

void print_text(const fd::report& r) {
  const auto& d = r.driver;
  if (d.loaded)
    std::printf("driver:   %s, CUDA %s (JIT accepts PTX ISA <= %s); cache identity %s\n", d.library.c_str(),
                d.version_text.c_str(), d.max_ptx_isa.c_str(), d.cache_identity.c_str());
  else
    std::printf("driver:   none: %s\n", d.error.c_str());
  if (d.loaded && r.devices.empty()) std::printf("devices:  none: %s\n", d.error.c_str());
  for (const auto& v : r.devices)
    std::printf("device %d: %s, CC %s (%s)%s, %s\n", v.ordinal, v.name.c_str(), core::cc_str(v.arch).c_str(),
                core::sm_name(v.arch).c_str(), v.tegra ? ", Tegra" : "", v.uuid.c_str());
  std::printf("policy:   %s (from the environment: FATPACK_FORCE_PTX_JIT, CUDA_FORCE_PTX_JIT, CUDA_DISABLE_PTX_JIT; a "
              "program's set_policy() or load_options may differ)\n",
              r.policy.c_str());
  const auto& c = r.cache;
  std::printf("cache:    %s%s%s", c.mode.c_str(), c.why.empty() ? "" : ": ", c.why.c_str());
  if (c.mode != "disabled")
    std::printf("; limit %s; entries of other drivers %s", c.max_bytes ? human_size(c.max_bytes).c_str() : "none",
                c.use_other_driver ? "used" : "not used (FATPACK_CACHE_OTHER_DRIVER=0)");
  std::printf("\n");
  for (const auto& l : c.layers) {
    std::printf("  %-8s %s: %s", l.role.c_str(), l.path.c_str(), l.state.c_str());
    if (l.state == "refused") std::printf(" (%s)", l.problem.c_str());
    if (l.state == "present")
      std::printf(", %s, %s on disk for %s of SASS, index %s%s", count_of(l.entries, "entry", "entries").c_str(),
                  human_size(l.bytes).c_str(), human_size(l.cubin_bytes).c_str(), l.index_ok ? "ok" : "missing or damaged",
                  l.temp_files ? (", " + count_of(l.temp_files, "unfinished temporary file", "unfinished temporary files")).c_str() : "");
    std::printf("\n");
  }
  for (const auto& w : c.warnings) std::printf("  warning: %s\n", w.c_str());
  for (const auto& p : r.packages) {
    std::string targets;
    for (const auto& t : p.targets) targets += (targets.empty() ? "" : ", ") + t;
    std::string modules;
    for (const auto& m : p.modules) modules += (modules.empty() ? "" : ", ") + core::printable_text(m);
    std::printf("package '%s' (%s): %s: %s; %s %s\n", core::printable_text(p.name).c_str(),
                core::printable_text(p.source).c_str(),
                count_of(p.entries, "entry", "entries").c_str(), targets.c_str(),
                p.modules.size() == 1 ? "module" : "modules", modules.c_str());
  }
  for (const auto& e : r.package_errors) std::printf("package refused: %s\n", e.c_str());
  std::size_t sass = 0, cached = 0, jit = 0, none = 0;
  if (!r.modules.empty()) std::printf("loads:\n");
  for (const auto& m : r.modules) {
    std::printf("  device %d (%s) %s/%s: ", m.device, core::sm_name(m.arch).c_str(),
                core::printable_text(m.package).c_str(), core::printable_text(m.module).c_str());
    if (!m.fits) {
      ++none;
      std::printf("NOTHING FITS: %s\n", m.reason.c_str());
      continue;
    }
    std::printf("%s (%s)", m.loads.c_str(), m.reason.c_str());
    if (m.jit) {
      std::printf("; %s", cache_words(m).c_str());
      ++(m.cache == "hit" || m.cache == "other-driver" ? cached : jit);
    } else {
      ++sass;
    }
    std::printf("\n");
  }
  if (!r.packages.empty() && !r.modules.empty())
    std::printf("summary:  %zu SASS, %zu from the cache, %zu to JIT-compile, %zu with nothing that fits\n", sass, cached,
                jit, none);
  else if (!r.packages.empty())
    std::printf("summary:  no device to plan for (the packages are listed above)\n");
}

int run_doctor(const doctor_args& a) {
  // The programs' packages, found and validated as `inspect` finds them (bounded reads); the bytes
  // stay here while the runtime's code reads them.
  std::vector<package_file> files;
  for (const auto& path : a.programs) {
    auto pf = load_package_file(path);
    if (!pf) {
      // No package at all: the kernels may live in a shared library the program loads.
      print_error(pf.error().message + (pf.error().reason == core::errc::bad_magic
                                            ? " (when a program's kernels are in a shared library it loads, name "
                                              "that library too)"
                                            : ""));
      return exit_failure;
    }
    files.push_back(std::move(pf).value());
  }
  std::vector<fd::package_bytes> inputs;
  for (const auto& f : files)
    for (const auto& p : f.packages)
      inputs.push_back({f.path + (f.embedded ? " (embedded)" : ""), p.bytes().data, p.bytes().size});
  const fd::report r = fd::diagnose(inputs);
  if (a.json) {
    print_json_document(to_json(r));
  } else {
    print_text(r);
  }
  std::cout << std::flush;
  bool nothing_fits = !r.package_errors.empty();
  for (const auto& m : r.modules) nothing_fits = nothing_fits || !m.fits;
  return nothing_fits ? exit_failure : exit_ok;
}

}  // namespace

command_runner add_doctor_command(CLI::App& app) {
  auto args = std::make_shared<doctor_args>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "When a program starts slowly or fails: the driver and its PTX ISA limit, the devices, the JIT cache "
      "(mode, limit, layers, sizes) and, for the packages the PROGRAMs embed, what each device would load, "
      "whether the cache has it and what would be JIT-compiled (the runtime's own code; nothing is written)");
  cmd->add_flag("--json", args->json, "Print one JSON document (schema_version 1)");
  cmd->add_option("programs", args->programs,
                  "Programs, shared libraries or packages whose packages to check (found as `inspect` finds them)");
  cmd->footer(cmd->get_footer() + "\nExit status 1 when a device present gets nothing from a module, or a PROGRAM cannot be read, "
              "embeds no package or one the registry refuses (a name clash).");
  return [args]() { return run_doctor(*args); };
}

}  // namespace fatpack::tool
