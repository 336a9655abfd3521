// fatpack verify: structure, table checksum, and every entry decompressed and checked.
#include "tool.hpp"

#include "fatpack/core/input.hpp"

#include <iostream>

namespace fatpack::tool {

command_runner add_verify_command(CLI::App& app) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Check packages: every offset and size, the table checksum, and every entry's payload and checksum");
  cmd->add_option("files", *files, "Packages or host binaries")->required();
  return [files]() {
    int rc = exit_ok;
    for (const auto& path : *files) {
      auto pf = load_package_file(path);
      if (!pf) {
        print_error(pf.error().message);
        rc = exit_failure;
        continue;
      }
      std::size_t entries = 0;
      bool ok = true;
      for (const auto& pkg : pf->packages) {
        core::status st = core::verify_package_images(pkg);
        if (!st) {
          print_error(st.error().message);
          ok = false;
          rc = exit_failure;
        }
        entries += pkg.entries().size();
      }
      if (ok)
        std::cout << path << ": ok (" << count_of(pf->packages.size(), "package", "packages") << ", "
                  << count_of(entries, "entry", "entries") << ")\n";
    }
    return rc;
  };
}

}  // namespace fatpack::tool
