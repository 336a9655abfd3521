// fatpack plan: which entry a GPU and driver would load, and why — computed by core::select, the
// same function the runtime calls, so the plan is what the product will do.
#include "json_out.hpp"
#include "tool.hpp"

#include "fatpack/core/arch_table.hpp"
#include "fatpack/core/hex.hpp"
#include "fatpack/core/select.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

namespace fatpack::tool {
namespace {

// "sm_86", "86", "8.6" -> 86. A GPU is a compute capability: a/f suffixes name code, not devices.
// `option` names the option the text came from in the message (--gpu or --require).
std::uint32_t parse_gpu(const std::string& text, const char* option) {
  auto cc = core::parse_compute_capability(text, core::cc_suffix::reject);
  if (!cc) throw usage_error{std::string(option) + " " + cc.error().message};
  return *cc;
}

struct module_entries {
  std::vector<core::entry_desc> descs;
  std::vector<const core::entry_info*> infos;
};

bool has_ltoir(const module_entries& me) {
  for (const auto& d : me.descs)
    if (d.target.kind == core::entry_kind::ltoir) return true;
  return false;
}

}  // namespace

command_runner add_plan_command(CLI::App& app) {
  struct options {
    std::vector<std::string> gpus, required;
    std::string driver, nvjitlink, policy = "prefer_sass", file, module;
    bool json = false, tegra = false;
  };
  auto o = std::make_shared<options>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Show which entry each GPU would load and why every other entry is refused (the runtime's own rules). "
              "Without --gpu or --require: a matrix over every architecture nvcc knows plus future ones (sm_130, sm_200)");
  // One list per occurrence (allow_extra_args(false)): in `plan --json --gpu sm_90 app` the file after
  // the list is the file, not one more GPU.
  cmd->add_option("--gpu", o->gpus, "GPUs by compute capability: sm_86, 86 or 8.6; a comma-separated list, repeatable")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--require", o->required,
                  "CI gate: exit 1 when one of these GPUs (sm_75,sm_90,...; repeatable) would get nothing from a module "
                  "of the file, naming the GPU, the module and why; they are planned like --gpu")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--driver", o->driver,
                  "CUDA version of the driver, e.g. 12.4 (limits the PTX ISA it accepts; default: not checked)");
  cmd->add_option("--nvjitlink", o->nvjitlink,
                  "CUDA version of the nvJitLink the program will load, e.g. 13.0: LTO-IR entries (build -- -rdc=true "
                  "-dlto) link through it (default: none, so LTO-IR is refused as at run time without the library)");
  cmd->add_option("--policy", o->policy, "prefer_sass (default), force_ptx or sass_only")
      ->check(CLI::IsMember({"prefer_sass", "force_ptx", "sass_only"}));
  cmd->add_flag("--tegra", o->tegra, "The GPUs are Tegra (Jetson) devices: no SASS minor-version compatibility");
  cmd->add_option("--module", o->module, "Only this module")
      ->check(not_empty("give a module, or leave --module out for every module"));
  cmd->add_flag("--json", o->json, "Print one JSON document (schema_version 1)");
  cmd->add_option("file", o->file, "Package or host binary")->required();
  return [o]() {
    int driver = 0;
    if (!o->driver.empty()) {
      auto v = core::parse_cuda_version(o->driver);
      if (!v) throw usage_error{"--driver: " + v.error().message};
      driver = *v;
    }
    int nvjitlink = 0;
    if (!o->nvjitlink.empty() && o->nvjitlink != "none") {
      auto v = core::parse_cuda_version(o->nvjitlink);
      if (!v) throw usage_error{"--nvjitlink: " + v.error().message};
      if (*v < 13000) throw usage_error{"--nvjitlink: the runtime loads nvJitLink 13.0 or newer, not " + o->nvjitlink};
      nvjitlink = *v;
    }
    const fatpack::policy pol = o->policy == "force_ptx"   ? fatpack::policy::force_ptx
                                : o->policy == "sass_only" ? fatpack::policy::sass_only
                                                           : fatpack::policy::prefer_sass;
    std::vector<std::uint32_t> gpus;
    for (const auto& g : list_items(o->gpus)) gpus.push_back(parse_gpu(g, "--gpu"));
    if (!o->gpus.empty() && gpus.empty()) throw usage_error{"--gpu: no GPU given"};
    std::vector<std::uint32_t> required;
    for (const auto& g : list_items(o->required)) {
      const std::uint32_t cc = parse_gpu(g, "--require");
      required.push_back(cc);
      if (std::find(gpus.begin(), gpus.end(), cc) == gpus.end()) gpus.push_back(cc);
    }
    if (!o->required.empty() && required.empty()) throw usage_error{"--require: no GPU given"};
    const bool matrix = gpus.empty();
    if (matrix) {
      gpus = core::known_sass_archs();
      for (auto a : core::hypothetical_archs()) gpus.push_back(a);
    }
    auto pf = load_package_file(o->file);
    if (!pf) {
      print_error(pf.error().message);
      return exit_failure;
    }

    nlohmann::json doc;
    doc["schema_version"] = 1;
    doc["file"] = o->file;
    doc["driver"] = driver ? nlohmann::json(core::cuda_version_str(driver)) : nlohmann::json(nullptr);
    doc["max_ptx_isa"] = driver ? nlohmann::json(core::max_ptx_isa_for_driver(driver).str()) : nlohmann::json(nullptr);
    doc["nvjitlink"] = nvjitlink ? nlohmann::json(core::cuda_version_str(nvjitlink)) : nlohmann::json(nullptr);
    doc["policy"] = fatpack::policy_name(pol);
    doc["plans"] = nlohmann::json::array();
    const std::string driver_text =
        driver ? "a CUDA " + core::cuda_version_str(driver) + " driver (PTX ISA <= " +
                     core::max_ptx_isa_for_driver(driver).str() + ")"
               : "any driver (PTX ISA not checked; pass --driver)";
    const std::string nvjitlink_text = nvjitlink ? "nvJitLink " + core::cuda_version_str(nvjitlink)
                                                 : "no nvJitLink (LTO-IR refused; pass --nvjitlink 13.0)";
    bool matched = false;
    nlohmann::json missing = nlohmann::json::array();  // required GPUs that get nothing, per module
    for (const auto& pkg : pf->packages) {
      std::map<std::string, module_entries> modules;  // sorted: deterministic output
      for (const auto& e : pkg.entries()) {
        if (!e.selectable()) continue;  // a link group is one candidate, named by its first part
        auto& m = modules[std::string(e.module_name)];
        m.descs.push_back({e.target, e.ptx_isa});
        m.infos.push_back(&e);
      }
      for (const auto& [mod, me] : modules) {
        if (!o->module.empty() && mod != o->module) continue;
        matched = true;
        if (!o->json) {
          std::cout << "package '" << printable(std::string(pkg.name())) << "', module '" << printable(mod) << "' with " << driver_text
                    << (has_ltoir(me) ? ", " + nvjitlink_text : std::string()) << ", policy "
                    << fatpack::policy_name(pol) << (o->tegra ? ", Tegra" : "") << ":\n";
          if (matrix) std::printf("  %-8s %-6s %-14s %s\n", "GPU", "CC", "loads", "why");
        }
        for (const std::uint32_t gpu : gpus) {
          const core::selection sel = core::select(me.descs, {gpu, o->tegra}, driver, pol, nvjitlink);
          nlohmann::json plan;
          plan["package"] = std::string(pkg.name());
          plan["module"] = mod;
          plan["device"] = core::sm_name(gpu);
          plan["compute_capability"] = core::cc_str(gpu);
          plan["chosen"] = nullptr;
          plan["candidates"] = nlohmann::json::array();
          for (const auto& c : sel.candidates) {
            const core::entry_info& e = *me.infos[c.entry];
            nlohmann::json cj;
            cj["entry"] = e.index;
            cj["target"] = e.target.str();
            cj["kind"] = core::kind_name(e.target.kind);
            cj["ptx_isa"] = e.target.kind == core::entry_kind::ptx ? nlohmann::json(e.ptx_isa.str()) : nlohmann::json(nullptr);
            cj["link_parts"] = e.link_parts;  // 0: a standalone entry; n: a link group of n parts (format 1.1)
            cj["verdict"] = core::verdict_name(c.verdict);
            cj["reason"] = c.reason;
            if (c.verdict == core::verdict::chosen) plan["chosen"] = cj;
            plan["candidates"].push_back(cj);
          }
          if (!sel.nothing_fits.empty()) plan["nothing_fits"] = sel.nothing_fits;
          if (plan["chosen"].is_null() && std::find(required.begin(), required.end(), gpu) != required.end())
            missing.push_back({{"device", core::sm_name(gpu)}, {"package", std::string(pkg.name())}, {"module", mod},
                               {"why", sel.nothing_fits}});
          doc["plans"].push_back(plan);
          if (o->json) continue;
          if (matrix) {
            std::string loads = "none", why = "nothing fits";
            for (const auto& c : sel.candidates) {
              if (c.verdict != core::verdict::chosen) continue;
              const core::entry_info& e = *me.infos[c.entry];
              loads = e.target.str() + (e.target.kind == core::entry_kind::ptx ? " (JIT)" : "");
              why = c.reason;
            }
            std::printf("  %-8s %-6s %-14s %s\n", core::sm_name(gpu).c_str(), core::cc_str(gpu).c_str(), loads.c_str(),
                        why.c_str());
            continue;
          }
          std::cout << "  " << core::sm_name(gpu) << " (CC " << core::cc_str(gpu) << "):\n";
          for (const auto& c : sel.candidates) {
            const core::entry_info& e = *me.infos[c.entry];
            std::string label = e.target.str();
            if (e.target.kind == core::entry_kind::ptx) label += " (ISA " + e.ptx_isa.str() + ")";
            if (e.in_link_group()) label += " [" + std::to_string(e.link_parts) + " parts]";
            std::printf("    %-9s entry %-3zu %-22s %s\n", core::verdict_name(c.verdict), e.index, label.c_str(),
                        c.reason.c_str());
          }
          if (!sel.nothing_fits.empty()) std::cout << "    nothing fits: " << sel.nothing_fits << "\n";
          std::fflush(stdout);
        }
      }
    }
    if (!matched) {
      print_error(o->file + ": no module named '" + o->module + "'");
      return exit_failure;
    }
    if (!required.empty()) {
      nlohmann::json req;
      for (const std::uint32_t gpu : required) req["devices"].push_back(core::sm_name(gpu));
      req["ok"] = missing.empty();
      req["missing"] = missing;
      doc["require"] = req;
    }
    if (o->json) print_json_document(doc);
    std::cout << std::flush;
    for (const auto& m : missing)
      print_error("--require: " + m["device"].get<std::string>() + " gets nothing from package '" +
                  core::printable_text(m["package"].get<std::string>()) + "', module '" +
                  core::printable_text(m["module"].get<std::string>()) +
                  "': " + m["why"].get<std::string>());
    if (!missing.empty()) return exit_failure;
    if (!required.empty() && !o->json) {
      std::string list;
      for (const std::uint32_t gpu : required) list += (list.empty() ? "" : ", ") + core::sm_name(gpu);
      std::cout << "--require: every module has code for " << list << "\n";
    }
    return exit_ok;
  };
}

}  // namespace fatpack::tool
