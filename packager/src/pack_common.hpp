// What `pack` and `build` share: turning a list of images into a written package.
#pragma once

#include "fatpack/core/package_writer.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace fatpack::tool {

struct codec_options {
  std::string codec = "lz4";
  int level = -1;
  std::uint32_t block_size = 0;
  void add_to(CLI::App& cmd, bool with_level);
};

// The package name when --name is not given: the output file's name without directory and extension.
std::string default_package_name(const std::string& output_path);
// The module name of an input file: its file name up to the first '.' ("vadd.sm_90.cubin" -> "vadd").
std::string module_name_of(const std::string& path);

// Makes link groups (docs/format.md §4.1) of PTX entries that share module, target and PTX ISA
// (relocatable PTX from nvcc -ptx -rdc=true, one per source): each such set of two or more becomes
// one group, its parts in input order, placed where its first part was. Other entries keep their
// order. Returns the number of groups made.
std::size_t form_link_groups(std::vector<core::entry_input>& entries);

// An LTO-IR entry (nvcc -ltoir -dlto output, `bytes`) of `target` (lto_XY) and `module`. Nothing here
// reads NVVM's LTO-IR, so its kernels are those of `ptx_path`, the PTX of the same source for the
// same arch (compute_XY), which nvcc made from the same source.
result<core::entry_input> ltoir_entry(std::vector<std::uint8_t> bytes, const core::target& target,
                                      const std::string& ptx_path, const std::string& module, const std::string& origin);

// nvJitLink's -lto link of the LTO-IR files `inputs` into the cubin `output` for the SASS `target`
// (cmd_link_lto.cpp; `what` names it in messages). unavailable: nvJitLink could not be loaded or could
// not link, why in `why` (the caller falls back to the nvcc -dlink cubin, or fails); failed: an error
// was printed (an unreadable input, not LTO-IR, the output not written).
enum class lto_link_outcome { linked, unavailable, failed };
lto_link_outcome link_lto_files(const std::vector<std::string>& inputs, const core::target& target,
                                const std::string& ptxas_options, const std::string& output, const std::string& what,
                                bool verbose, std::string& why);

// The ptxas options to record on PTX entries compiled with the nvcc arguments after '--'
// (core::ptxas_options_from_nvcc); a bad value there is a usage error (thrown) naming it.
std::string jit_options_from_passthrough();

// The options recorded on PTX entries (fatpack/core/jit_options.hpp): false, with an error printed,
// when one has an invalid value; a warning (once per distinct list) for options no JIT can apply.
bool check_recorded_options(const std::string& output, const std::vector<core::entry_input>& entries);

// Checks the recorded options (above), then writes the package atomically (only when its content
// changed). Returns the exit code and prints diagnostics; with verbose, prints a one-line summary on
// stdout.
int write_package_file(const std::string& output, const std::string& name, const std::vector<core::entry_input>& entries,
                       const codec_options& codec, bool verbose);

}  // namespace fatpack::tool
