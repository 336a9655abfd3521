// fatpack inspect: what a package (or a host binary embedding packages) holds. Human table or one
// JSON document (schema_version 1; additive changes keep the version, anything else bumps it).
// Kernels are shown demangled (the table: without the return type, as a kernel is asked for by
// name; the JSON: the symbols in "kernels", c++filt's text in "kernels_demangled").
#include "json_out.hpp"
#include "tool.hpp"

#include "fatpack/core/hex.hpp"
#include "fatpack/core/kernel_names.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

namespace fatpack::tool {
namespace {

nlohmann::json entry_json(const core::entry_info& e) {
  nlohmann::json j;
  j["index"] = e.index;
  j["module"] = std::string(e.module_name);
  j["kind"] = core::kind_name(e.target.kind);
  j["target"] = e.target.str();
  j["ptx_isa"] = e.target.kind == core::entry_kind::ptx ? nlohmann::json(e.ptx_isa.str()) : nlohmann::json(nullptr);
  j["toolkit"] = e.toolkit_version ? nlohmann::json(core::cuda_version_str(int(e.toolkit_version))) : nlohmann::json(nullptr);
  j["codec"] = core::codec_name(e.codec);
  j["block_size"] = e.block_size;
  j["raw_size"] = e.raw_size;
  j["stored_size"] = e.stored_size;
  j["offset"] = e.payload_offset;
  j["xxh3"] = core::hex16(e.raw_xxh3);
  j["options"] = std::string(e.options);
  nlohmann::json kernels = nlohmann::json::array(), demangled = nlohmann::json::array();
  for (auto k : e.kernels) {
    kernels.push_back(std::string(k));
    demangled.push_back(core::demangle_symbol(k));
  }
  j["kernels"] = kernels;
  j["kernels_demangled"] = demangled;
  // Format 1.1 link groups: part k of n relocatable PTX entries JIT-linked as one module; null otherwise.
  j["pieces"] = e.plan.pieces.size();  // kernel-granular JIT plan (format 1.2); 0: none
  j["link"] = e.in_link_group() ? nlohmann::json{{"part", e.link_part}, {"parts", e.link_parts}} : nlohmann::json(nullptr);
  return j;
}

void print_human(const package_file& pf) {
  for (std::size_t p = 0; p < pf.packages.size(); ++p) {
    const auto& pkg = pf.packages[p];
    std::uint64_t raw = 0, stored = 0;
    for (const auto& e : pkg.entries()) {
      raw += e.raw_size;
      stored += e.stored_size;
    }
    std::cout << pf.path;
    if (pf.embedded || pf.packages.size() > 1) std::cout << " [package " << p << "]";
    std::cout << ": package '" << core::printable_text(pkg.name()) << "', format " << pkg.version_major() << "." << pkg.version_minor()
              << ", " << count_of(pkg.entries().size(), "entry", "entries") << ", " << human_size(pkg.total_size()) << " (raw images "
              << human_size(raw) << ", stored " << human_size(stored) << ")\n";
    std::printf("  %-3s %-14s %-13s %-4s %-5s %-5s %12s %12s  %-16s %s\n", "#", "module", "target", "kind", "isa",
                "codec", "raw", "stored", "xxh3", "kernels");
    for (const auto& e : pkg.entries()) {
      // "; " between kernels: a demangled name has commas of its own.
      std::string kernels;
      for (auto k : e.kernels)
        kernels += (kernels.empty() ? "" : "; ") + core::printable_text(core::describe_kernel(k).display);
      if (e.in_link_group())
        kernels += (kernels.empty() ? "" : " ") + std::string("[link part ") + std::to_string(e.link_part + 1) + "/" +
                   std::to_string(e.link_parts) + "]";
      std::printf("  %-3zu %-14s %-13s %-4s %-5s %-5s %12llu %12llu  %-16s %s\n", e.index,
                  core::printable_text(e.module_name).c_str(), e.target.str().c_str(), core::kind_name(e.target.kind),
                  e.target.kind == core::entry_kind::ptx ? e.ptx_isa.str().c_str() : "-", core::codec_name(e.codec),
                  static_cast<unsigned long long>(e.raw_size), static_cast<unsigned long long>(e.stored_size),
                  core::hex16(e.raw_xxh3).c_str(), kernels.c_str());
      if (!e.options.empty()) std::printf("      options: %s\n", core::printable_text(e.options).c_str());
      if (!e.plan.empty())
        std::printf("      pieces: %zu (kernel-granular JIT, docs/format.md §4.2)\n", e.plan.pieces.size());
    }
  }
  std::fflush(stdout);
}

}  // namespace

command_runner add_inspect_command(CLI::App& app) {
  struct options {
    std::vector<std::string> files;
    bool json = false;
  };
  auto o = std::make_shared<options>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "List the entries of packages, or of the packages embedded in executables, objects and archives");
  cmd->add_flag("--json", o->json, "Print one JSON document (schema_version 1) instead of a table");
  cmd->add_option("files", o->files, "Packages or host binaries")->required();
  return [o]() {
    nlohmann::json doc;
    doc["schema_version"] = 1;
    doc["packages"] = nlohmann::json::array();
    int rc = exit_ok;
    for (const auto& path : o->files) {
      auto pf = load_package_file(path);
      if (!pf) {
        print_error(pf.error().message);
        rc = exit_failure;
        continue;
      }
      if (!o->json) {
        print_human(*pf);
        continue;
      }
      for (const auto& pkg : pf->packages) {
        nlohmann::json p;
        p["file"] = path;
        p["name"] = std::string(pkg.name());
        p["format_version"] = std::to_string(pkg.version_major()) + "." + std::to_string(pkg.version_minor());
        p["size"] = pkg.total_size();
        p["offset"] = std::uint64_t(pkg.bytes().data - pf->bytes.data());
        p["entries"] = nlohmann::json::array();
        for (const auto& e : pkg.entries()) p["entries"].push_back(entry_json(e));
        doc["packages"].push_back(p);
      }
    }
    if (o->json) print_json_document(doc);
    return rc;
  };
}

}  // namespace fatpack::tool
