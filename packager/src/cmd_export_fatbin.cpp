// fatpack export-fatbin: a standard NVIDIA fatbin with the package's SASS and PTX, for tools that
// only know fatbins (cuobjdump, cuModuleLoadData, CUDA runtime registration).
#include "file_io.hpp"
#include "tool.hpp"

#include "fatpack/core/input.hpp"

namespace fatpack::tool {

command_runner add_export_fatbin_command(CLI::App& app) {
  struct options {
    std::string output, file, module;
  };
  auto o = std::make_shared<options>();
  CLI::App* cmd = app.add_subcommand("export-fatbin", "Write the package's SASS and PTX entries as a standard NVIDIA fatbin");
  cmd->add_option("-o,--output", o->output, "Output fatbin")->required();
  cmd->add_option("--module", o->module, "Only this module (needed when the package holds several)")
      ->check(not_empty("give a module, or leave --module out when the package holds one"));
  cmd->add_option("file", o->file, "Package or host binary")->required();
  return [o]() {
    require_output_not_input(o->output, {o->file});
    auto pf = load_package_file(o->file);
    if (!pf) {
      print_error(pf.error().message);
      return exit_failure;
    }
    std::vector<core::entry_input> entries;
    std::string first_module;
    for (const auto& pkg : pf->packages) {
      for (const auto& e : pkg.entries()) {
        if (!o->module.empty() && e.module_name != o->module) continue;
        if (first_module.empty()) first_module = std::string(e.module_name);
        if (e.module_name != first_module) {
          print_error(o->file + ": holds several modules ('" + first_module + "', '" + std::string(e.module_name) +
                      "'); a fatbin holds one: choose with --module");
          return exit_failure;
        }
        if (e.target.kind == core::entry_kind::ltoir) {
          print_warning(o->file + ": " + e.describe() + ": LTO-IR is not exported");
          continue;
        }
        // A fatbin has no way to say that PTX entries link together: the driver would take one part
        // alone. The group's SASS (device-linked at build time) is exported.
        if (e.in_link_group()) {
          print_warning(o->file + ": " + e.describe() + ": part " + std::to_string(e.link_part + 1) + " of " +
                        std::to_string(e.link_parts) + " of a link group (relocatable PTX), which a fatbin cannot " +
                        "hold, is not exported");
          continue;
        }
        auto raw = pkg.decompress(e.index);
        if (!raw) {
          print_error(raw.error().message);
          return exit_failure;
        }
        core::entry_input in;
        in.target = e.target;
        in.ptx_isa = e.ptx_isa;
        in.module_name = std::string(e.module_name);
        in.raw = std::move(raw).value();
        in.origin = o->file + ": " + e.describe();
        entries.push_back(std::move(in));
      }
    }
    if (entries.empty()) {
      print_error(o->file + ": nothing to export" + (o->module.empty() ? "" : " for module '" + o->module + "'"));
      return exit_failure;
    }
    auto fatbin = core::write_fatbin(entries);
    if (!fatbin) {
      print_error(o->file + ": " + fatbin.error().message);
      return exit_failure;
    }
    core::status st = write_file_atomic(o->output, core::byte_span(*fatbin));
    if (!st) {
      print_error(st.error().message);
      return exit_failure;
    }
    return exit_ok;
  };
}

}  // namespace fatpack::tool
