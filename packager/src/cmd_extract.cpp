// fatpack extract: write entries back out as the files nvcc made (byte-identical to what was packed).
#include "file_io.hpp"
#include "tool.hpp"

#include <map>
#include <iostream>
#include <sys/stat.h>

namespace fatpack::tool {

command_runner add_extract_command(CLI::App& app) {
  struct options {
    std::string dir = ".", target, module, file;
  };
  auto o = std::make_shared<options>();
  CLI::App* cmd = app.add_subcommand(
      "extract", "Write the entries of a package (or of the packages a binary embeds) as .cubin/.ptx files");
  cmd->add_option("-o,--output-dir", o->dir, "Directory to write into (default: .)");
  cmd->add_option("--target", o->target, "Only entries for this target, e.g. sm_90, sm_90a, compute_90");
  cmd->add_option("--module", o->module, "Only entries of this module")
      ->check(not_empty("give a module, or leave --module out for every module"));
  cmd->add_option("file", o->file, "Package or host binary")->required();
  return [o]() {
    core::target want{};
    if (!o->target.empty()) {
      auto t = core::target::parse(o->target);
      if (!t) throw usage_error{"--target: " + t.error().message};
      want = *t;
    }
    auto pf = load_package_file(o->file);
    if (!pf) {
      print_error(pf.error().message);
      return exit_failure;
    }
    ::mkdir(o->dir.c_str(), 0777);  // an existing directory is fine; write errors report the rest
    std::size_t written = 0;
    for (const auto& pkg : pf->packages) {
      // PTX of one target may exist in several ISA versions: name them apart only then.
      std::map<std::string, int> per_target;
      for (const auto& e : pkg.entries()) if (e.selectable()) ++per_target[std::string(e.module_name) + "." + e.target.str()];
      for (const auto& e : pkg.entries()) {
        if (!o->target.empty() && e.target != want) continue;
        if (!o->module.empty() && e.module_name != o->module) continue;
        auto raw = pkg.decompress(e.index);
        if (!raw) {
          print_error(raw.error().message);
          return exit_failure;
        }
        // Module and package names come from the package: one safe path component each, so no name
        // can write outside -o DIR ("../../x", "/etc/x").
        std::string name = safe_file_component(std::string(e.module_name)) + "." + e.target.str();
        if (pf->packages.size() > 1) name = safe_file_component(std::string(pkg.name())) + "." + name;
        if (per_target[std::string(e.module_name) + "." + e.target.str()] > 1 && e.target.kind == core::entry_kind::ptx)
          name += ".isa" + e.ptx_isa.str();
        if (e.in_link_group()) name += ".part" + std::to_string(e.link_part);
        name += e.target.kind == core::entry_kind::sass  ? ".cubin"
                : e.target.kind == core::entry_kind::ptx ? ".ptx"
                                                         : ".ltoir";
        const std::string path = o->dir + "/" + name;
        core::status st = write_file_atomic(path, core::byte_span(*raw));
        if (!st) {
          print_error(st.error().message);
          return exit_failure;
        }
        std::cout << "Extracted: " << path << "\n";
        ++written;
      }
    }
    if (written == 0) {
      print_error(o->file + ": no entry matches" + (o->target.empty() ? "" : " --target " + o->target) +
                  (o->module.empty() ? "" : " --module " + o->module));
      return exit_failure;
    }
    return exit_ok;
  };
}

}  // namespace fatpack::tool
