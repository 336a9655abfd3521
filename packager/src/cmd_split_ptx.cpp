// fatpack split-ptx: one PTX module into independent pieces (core/ptx_split.hpp,
// docs/splitting.md), to look at what the splitter does and to measure pieces against the module.
#include "file_io.hpp"
#include "json_out.hpp"
#include "tool.hpp"

#include "fatpack/core/ptx_split.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <sys/stat.h>

namespace fatpack::tool {

command_runner add_split_ptx_command(CLI::App& app) {
  struct options {
    std::string file, dir;
    bool per_kernel = false, json = false;
    std::size_t groups = 0;
  };
  auto o = std::make_shared<options>();
  CLI::App* cmd = app.add_subcommand(
      "split-ptx", "Split a PTX module into independent pieces (kernels that share no state apart) and list them");
  cmd->add_option("file", o->file, "PTX file")->required();
  auto* per = cmd->add_flag("--per-kernel", o->per_kernel, "As many pieces as sharing allows (the default)");
  cmd->add_option("--groups", o->groups, "At most N pieces, balanced by PTX bytes")
      ->check(whole_number())
      ->check(CLI::Range(std::size_t(1), std::size_t(1) << 20))
      ->excludes(per);
  cmd->add_option("-o,--output-dir", o->dir, "Write the pieces as DIR/piece_N.ptx (default: write nothing)");
  cmd->add_flag("--json", o->json, "Print one JSON document (schema_version 1) instead of a table");
  return [o]() {
    auto bytes = read_file(o->file);
    if (!bytes) {
      print_error(bytes.error().message);
      return exit_failure;
    }
    core::ptx_split_options opt;
    if (o->groups) {
      opt.mode = core::ptx_split_options::granularity::groups;
      opt.groups = o->groups;
    }
    const auto start = std::chrono::steady_clock::now();
    auto split = core::split_ptx(core::byte_span(*bytes), o->file, opt);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!split) {
      print_error(split.error().message);
      return exit_failure;
    }
    std::vector<std::string> paths;
    if (!o->dir.empty()) {
      ::mkdir(o->dir.c_str(), 0777);  // an existing directory is fine; write errors report the rest
      for (std::size_t i = 0; i < split->pieces.size(); ++i) {
        paths.push_back(o->dir + "/piece_" + std::to_string(i) + ".ptx");
        core::status st = write_file_atomic(paths.back(), core::byte_span(split->pieces[i].text));
        if (!st) {
          print_error(st.error().message);
          return exit_failure;
        }
      }
    }
    if (o->json) {
      nlohmann::json doc;
      doc["schema_version"] = 1;
      doc["file"] = o->file;
      doc["bytes"] = bytes->size();
      doc["split"] = split->unsplit_reason.empty();
      doc["unsplit_reason"] = split->unsplit_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(split->unsplit_reason);
      doc["milliseconds"] = ms;
      doc["pieces"] = nlohmann::json::array();
      for (std::size_t i = 0; i < split->pieces.size(); ++i) {
        nlohmann::json p;
        p["bytes"] = split->pieces[i].text.size();
        p["kernels"] = split->pieces[i].kernels;
        p["path"] = paths.empty() ? nlohmann::json(nullptr) : nlohmann::json(paths[i]);
        doc["pieces"].push_back(p);
      }
      print_json_document(doc);
      return exit_ok;
    }
    std::cout << o->file << ": " << bytes->size() << " bytes, "
              << count_of(split->pieces.size(), "piece", "pieces") << " (" << ms << " ms)\n";
    if (!split->unsplit_reason.empty()) std::cout << "  not split: " << split->unsplit_reason << "\n";
    for (std::size_t i = 0; i < split->pieces.size(); ++i) {
      const auto& p = split->pieces[i];
      std::cout << "  piece " << i << ": " << p.text.size() << " bytes, "
                << count_of(p.kernels.size(), "kernel", "kernels") << (paths.empty() ? "" : " -> " + paths[i]) << "\n";
      for (const auto& k : p.kernels) std::cout << "    " << k << "\n";
    }
    return exit_ok;
  };
}

}  // namespace fatpack::tool
