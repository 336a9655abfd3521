// fatpack pack: nvcc output (cubins, PTX, nvcc fatbins) -> one package. Input kinds come from content.
#include "file_io.hpp"
#include "pack_common.hpp"
#include "tool.hpp"

#include "fatpack/core/input.hpp"
#include "fatpack/core/jit_options.hpp"
#include "fatpack/core/package.hpp"

#include <algorithm>
#include <iostream>
#include <set>

namespace fatpack::tool {

void codec_options::add_to(CLI::App& cmd, bool with_level) {
  cmd.add_option("--codec", codec, "Per-entry compression: lz4 (default; fastest to load), zstd (smallest) or none")
      ->check(CLI::IsMember({"lz4", "zstd", "none"}));
  if (with_level)
    // From 1: the runtime's codecs take -1 for "the default", which a negative --level reached
    // silently (zstd -5 gave level 19).
    cmd.add_option("--level", level, "Compression level: lz4 1-12 (default 12 = highest HC level), zstd 1-22 (default 19)")
        ->check(whole_number())
        ->check(CLI::Range(1, 22));
  cmd.add_option("--block-size", block_size,
                 "Raw bytes per independently compressed block (default: lz4 262144, zstd 4194304; at most 1 GiB)")
      ->check(whole_number())
      ->check(CLI::Range(std::uint32_t{1}, std::uint32_t{1} << 30));
}

std::string default_package_name(const std::string& output_path) {
  std::string base = output_path.substr(output_path.find_last_of('/') + 1);
  const auto dot = base.find('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

std::string module_name_of(const std::string& path) { return default_package_name(path); }

std::size_t form_link_groups(std::vector<core::entry_input>& entries) {
  auto same_group = [](const core::entry_input& a, const core::entry_input& b) {
    // PTX or LTO-IR (target == target includes the kind): both are linked at run time.
    return a.target.kind != core::entry_kind::sass && a.module_name == b.module_name && a.target == b.target &&
           a.ptx_isa == b.ptx_isa;
  };
  std::vector<core::entry_input> out;
  std::vector<bool> taken(entries.size(), false);
  std::size_t groups = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (taken[i]) continue;
    std::vector<std::size_t> members{i};
    for (std::size_t j = i + 1; j < entries.size(); ++j)
      if (!taken[j] && same_group(entries[i], entries[j])) members.push_back(j);
    const bool group = members.size() > 1 && members.size() <= 0xffff;
    groups += group;
    for (std::size_t k = 0; k < members.size(); ++k) {
      taken[members[k]] = true;
      core::entry_input& e = entries[members[k]];
      if (group) {
        e.link_part = std::uint16_t(k);
        e.link_parts = std::uint16_t(members.size());
      }
      out.push_back(std::move(e));
    }
  }
  entries = std::move(out);
  return groups;
}

result<core::entry_input> ltoir_entry(std::vector<std::uint8_t> bytes, const core::target& target,
                                      const std::string& ptx_path, const std::string& module, const std::string& origin) {
  auto ptx = read_file(ptx_path);
  if (!ptx) return ptx.error();
  auto from_ptx = core::import_input(core::byte_span(*ptx), ptx_path, module);
  if (!from_ptx) return from_ptx.error();
  core::entry_input e;
  e.target = target;
  e.module_name = module;
  e.origin = origin;
  for (const auto& k : *from_ptx) e.kernels.insert(e.kernels.end(), k.kernels.begin(), k.kernels.end());
  e.raw = std::move(bytes);
  return e;
}

// An LTO-IR input's target and the PTX input it takes its kernels from, by its name:
// DIR/STEM.lto_XY.ltoir and DIR/STEM.compute_XY.ptx (what the CMake macro writes). Empty target kind
// sass when the name does not say.
struct ltoir_name {
  core::target target{core::entry_kind::sass, 0, core::arch_variant::plain};
  std::string ptx_path;
};

ltoir_name parse_ltoir_name(const std::string& path) {
  ltoir_name out;
  const std::size_t slash = path.rfind('/');
  const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
  const std::size_t at = path.find(".lto_", base);
  const std::string ext = ".ltoir";
  if (at == std::string::npos || path.size() < ext.size() || path.compare(path.size() - ext.size(), ext.size(), ext) != 0)
    return out;
  const std::size_t end = path.size() - ext.size();
  if (end <= at + 1) return out;
  auto t = core::target::parse(path.substr(at + 1, end - at - 1));
  if (!t || t->kind != core::entry_kind::ltoir) return out;
  out.target = *t;
  out.ptx_path = path.substr(0, at + 1) + core::target{core::entry_kind::ptx, t->arch, t->variant}.str() + ".ptx";
  return out;
}

std::string jit_options_from_passthrough() {
  const core::recorded_options r = core::ptxas_options_from_nvcc(passthrough_args());
  if (!r.invalid.empty()) {
    std::string list;
    for (const auto& w : r.invalid) list += (list.empty() ? "" : ", ") + w;
    throw usage_error{"nvcc options after '--': " + list};
  }
  return r.text;
}

bool check_recorded_options(const std::string& output, const std::vector<core::entry_input>& entries) {
  std::set<std::string> warned;
  for (const auto& e : entries) {
    if (e.target.kind != core::entry_kind::ptx || e.options.empty()) continue;
    const core::jit_options o = core::parse_jit_options(e.options);
    const std::string where = output + ": " + (e.origin.empty() ? e.module_name : e.origin);
    if (!o.invalid.empty()) {
      std::string list;
      for (const auto& w : o.invalid) list += (list.empty() ? "" : ", ") + w;
      print_error(where + ": invalid ptxas options: " + list);
      return false;
    }
    if (o.ignored.empty()) continue;
    std::string list;
    for (const auto& w : o.ignored) list += (list.empty() ? "" : " ") + w;
    if (warned.insert(list).second)
      print_warning(where + ": ptxas options the JIT cannot apply (recorded, not passed to it on a GPU that needs the "
                            "PTX): " + list);
  }
  return true;
}

int write_package_file(const std::string& output, const std::string& name, const std::vector<core::entry_input>& entries,
                       const codec_options& copts, bool verbose) {
  if (!check_recorded_options(output, entries)) return exit_failure;
  auto c = core::parse_codec(copts.codec);
  if (!c) throw usage_error{c.error().message};
  core::pack_options opts;
  opts.codec = *c;
  opts.level = copts.level;
  opts.block_size = copts.block_size;
  auto bytes = core::write_package(name, entries, opts);
  if (!bytes) {
    print_error(output + ": " + bytes.error().message);
    return exit_failure;
  }
  bool changed = false;
  core::status st = write_file_atomic(output, core::byte_span(*bytes), &changed);
  if (!st) {
    print_error(st.error().message);
    return exit_failure;
  }
  if (verbose) {
    std::uint64_t raw = 0;
    for (const auto& e : entries) raw += e.raw.size();
    std::cout << output << ": package '" << name << "', " << count_of(entries.size(), "entry", "entries") << ", " << human_size(raw)
              << " raw -> " << human_size(bytes->size()) << " (" << copts.codec << ")"
              << (changed ? "" : ", unchanged") << "\n";
  }
  return exit_ok;
}

command_runner add_pack_command(CLI::App& app) {
  struct options {
    std::string output, name, module;
    codec_options codec;
    std::vector<std::string> inputs;
    bool verbose = false, link = false;
  };
  auto o = std::make_shared<options>();
  CLI::App* cmd = app.add_subcommand(
      "pack", "Pack cubins, PTX files and nvcc fatbins into one package (kinds detected from content). Arguments "
              "after '--': the nvcc options the PTX files were compiled with; those the JIT needs (-maxrregcount, "
              "-lineinfo, -G, -Xptxas -O<n>) are recorded on them (fatbins record their own).");
  cmd->add_option("-o,--output", o->output, "Output package (.fpk)")->required();
  cmd->add_option("--name", o->name, "Package name the runtime looks up (default: the output file name up to its first '.')")
      ->check(not_empty("give a name, or leave --name out for the output file's"));
  cmd->add_option("--module", o->module,
                  "Module name for every input (default: each input's file name up to the first '.')")
      ->check(not_empty("give a name, or leave --module out for each input's file name"));
  cmd->add_flag("--link", o->link,
                "Relocatable PTX (nvcc -ptx -rdc=true): PTX inputs of one module, target and PTX ISA form one link "
                "group that the runtime JIT-links as one module (use with --module)");
  o->codec.add_to(*cmd, true);
  cmd->add_flag("-v,--verbose", o->verbose, "Print a summary line");
  cmd->add_option("inputs", o->inputs, "cubin, PTX or nvcc fatbin files")->required();
  return [o]() {
    require_output_not_input(o->output, o->inputs);
    const std::string jit_options = jit_options_from_passthrough();
    std::vector<core::entry_input> entries;
    for (const auto& path : o->inputs) {
      auto bytes = read_file(path);
      if (!bytes) {
        print_error(bytes.error().message);
        return exit_failure;
      }
      const std::string module = o->module.empty() ? module_name_of(path) : o->module;
      if (core::detect_input(core::byte_span(*bytes)) == core::input_kind::ltoir &&
          !(bytes->size() >= 4 && (*bytes)[0] == 0x50 && (*bytes)[1] == 0xED)) {  // not a fatbin of LTO-IR
        // nvcc -ltoir -dlto output: its target and kernels come from its name and its PTX sibling.
        const ltoir_name n = parse_ltoir_name(path);
        if (n.target.kind != core::entry_kind::ltoir || std::find(o->inputs.begin(), o->inputs.end(), n.ptx_path) == o->inputs.end()) {
          print_error(path + ": LTO-IR (nvcc -ltoir -dlto) says neither its target nor its kernels: name it "
                      "STEM.lto_XY.ltoir and pack it with STEM.compute_XY.ptx, the PTX of the same source, whose kernels "
                      "it has" + (n.target.kind == core::entry_kind::ltoir ? " (" + n.ptx_path + " is not among the inputs)" : std::string()));
          return exit_failure;
        }
        auto e = ltoir_entry(std::move(*bytes), n.target, n.ptx_path, module, path);
        if (!e) {
          print_error(e.error().message);
          return exit_failure;
        }
        e->options = jit_options;
        entries.push_back(std::move(*e));
        continue;
      }
      auto imported = core::import_input(core::byte_span(*bytes), path, module);
      if (!imported) {
        print_error(imported.error().message);
        return exit_failure;
      }
      const bool ptx_file = core::detect_input(core::byte_span(*bytes)) == core::input_kind::ptx;
      for (auto& e : *imported) {
        if (ptx_file) e.options = jit_options;
        entries.push_back(std::move(e));
      }
    }
    if (o->link) form_link_groups(entries);
    return write_package_file(o->output, o->name.empty() ? default_package_name(o->output) : o->name, entries,
                              o->codec, o->verbose);
  };
}

}  // namespace fatpack::tool
