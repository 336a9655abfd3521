// fatpack link-lto: nvJitLink's -lto link of LTO-IR files into one cubin, at build time. What
// `build -- -rdc=true -dlto` does for each SASS target, as a command for the CMake macro.
#include "file_io.hpp"
#include "pack_common.hpp"
#include "tool.hpp"

#include "fatpack/admin/lto_link.hpp"
#include "fatpack/core/input.hpp"

#include <iostream>

namespace fatpack::tool {

lto_link_outcome link_lto_files(const std::vector<std::string>& inputs, const core::target& target,
                                const std::string& ptxas_options, const std::string& output, const std::string& what,
                                bool verbose, std::string& why) {
  std::vector<std::vector<std::uint8_t>> parts;
  for (const auto& path : inputs) {
    auto bytes = read_file(path);
    if (!bytes) {
      print_error(bytes.error().message);
      return lto_link_outcome::failed;
    }
    if (core::detect_input(core::byte_span(*bytes)) != core::input_kind::ltoir) {
      print_error(path + ": not LTO-IR (nvcc -ltoir -dlto output)");
      return lto_link_outcome::failed;
    }
    parts.push_back(std::move(*bytes));
  }
  auto linked = detail::lto::link_ltoir(parts, target.str(), ptxas_options, what + " (" + target.str() + ")");
  if (!linked) {
    why = linked.error().message;
    return lto_link_outcome::unavailable;
  }
  if (auto st = write_file_atomic(output, core::byte_span(linked->cubin)); !st) {
    print_error(st.error().message);
    return lto_link_outcome::failed;
  }
  if (verbose) std::cout << what << ": " << target.str() << " SASS linked by " << linked->linker << " -lto\n";
  return lto_link_outcome::linked;
}

command_runner add_link_lto_command(CLI::App& app) {
  struct options {
    std::string output, arch, fallback;
    std::vector<std::string> inputs;
    bool verbose = false;
  };
  auto o = std::make_shared<options>();
  CLI::App* cmd = app.add_subcommand(
      "link-lto", "Link LTO-IR files (nvcc -ltoir -dlto -rdc=true, one per source) into one cubin with nvJitLink -lto, "
                  "as build -- -rdc=true -dlto does for its SASS (FATPACK_NVJITLINK, else libnvJitLink.so.13). "
                  "Arguments after '--': the nvcc options, whose ptxas options (-maxrregcount, -lineinfo, -G, "
                  "-Xptxas -O<n>) the link applies");
  cmd->add_option("-o,--output", o->output, "Output cubin")->required();
  cmd->add_option("--arch", o->arch, "The SASS target: sm_90, sm_90a, sm_100f")->required();
  cmd->add_option("--fallback", o->fallback,
                  "A cubin (the nvcc -dlink one) to copy to the output, with a warning, where nvJitLink cannot be "
                  "loaded or cannot link; without it that is an error");
  cmd->add_flag("-v,--verbose", o->verbose, "Say which nvJitLink linked");
  cmd->add_option("inputs", o->inputs, "LTO-IR files")->required();
  return [o]() {
    require_output_not_input(o->output, o->inputs);
    auto t = core::target::parse(o->arch);
    if (!t || t->kind != core::entry_kind::sass) throw usage_error{"--arch: expected sm_XY (e.g. sm_90), not " + o->arch};
    const std::string ptxas_options = jit_options_from_passthrough();
    std::string why;
    switch (link_lto_files(o->inputs, *t, ptxas_options, o->output, o->output, o->verbose, why)) {
      case lto_link_outcome::linked: return exit_ok;
      case lto_link_outcome::failed: return exit_failure;
      case lto_link_outcome::unavailable: break;
    }
    if (o->fallback.empty()) {
      print_error(o->output + ": " + why);
      return exit_failure;
    }
    print_warning(o->output + ": " + o->arch + " SASS without link-time optimisation (" + o->fallback + "): " + why);
    auto bytes = read_file(o->fallback);
    if (!bytes) {
      print_error(bytes.error().message);
      return exit_failure;
    }
    if (auto st = write_file_atomic(o->output, core::byte_span(*bytes)); !st) {
      print_error(st.error().message);
      return exit_failure;
    }
    return exit_ok;
  };
}

}  // namespace fatpack::tool
