// The options a PTX entry records (its `options` field, docs/format.md) and what a JIT makes of them.
//
// An entry records ptxas options in ptxas syntax, as nvcc's fatbins do ("-O2 -maxrregcount=32
// --generate-line-info"). `fatpack build` writes the same text from the nvcc arguments it was given
// (ptxas_options_from_nvcc), so a package's PTX carries them to the JIT on a GPU that did not exist
// when it was built. The JIT applies four of them (CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_MAX_REGISTERS,
// CU_JIT_GENERATE_LINE_INFO, CU_JIT_GENERATE_DEBUG_INFO; nvJitLink gets the same in its syntax).
//
// The text comes from a package: hostile. It is bounded (max_options_text) and every value is checked;
// a value out of range is never passed on, it is listed in `invalid`. The packager refuses invalid
// options and warns about the ignored ones; the runtime logs both and compiles without them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fatpack::core {

// Longer options text is not parsed at all (one `invalid` line says so).
inline constexpr std::size_t max_options_text = 4096;
// CU_JIT_MAX_REGISTERS / -maxrregcount: ptxas raises small values to the ABI minimum itself and
// ignores values above 255.
inline constexpr int max_register_limit = 255;
// CU_JIT_OPTIMIZATION_LEVEL: 0..4 (4 is the driver's default).
inline constexpr int max_optimization_level = 4;

struct jit_options {
  int optimization_level = -1;  // -1: the JIT's default
  int max_registers = 0;        // 0: no limit
  bool line_info = false;
  bool debug_info = false;
  // Valid ptxas options no JIT call takes ("--warn-on-spills", "-maxrregcount=archmax").
  std::vector<std::string> ignored;
  // Values out of range or garbage, each with why ("-maxrregcount=-5: not a register count (1..255)").
  std::vector<std::string> invalid;

  // The applied options alone, in one fixed order and spelling ("-O3 -maxrregcount=32
  // --generate-line-info -g"); "" when none. Same meaning, same text: what the JIT key holds.
  std::string canonical() const;
};

// Parses ptxas options as entries record them: -O<n>, --opt-level=<n> / --opt-level <n>,
// -maxrregcount=<n> / --maxrregcount=<n> / -maxrregcount <n>, -lineinfo / --generate-line-info,
// -g / --device-debug; -v / --verbose (the JIT log is verbose anyway) and the two options nvcc
// records with -G (--dont-merge-basicblocks, --return-at-end) are accepted and need nothing.
jit_options parse_jit_options(std::string_view ptxas_options);

// What `fatpack build` records on its PTX entries, from the arguments it passes to nvcc.
struct recorded_options {
  std::string text;                    // ptxas syntax, for entry_input::options ("" when none)
  std::vector<std::string> not_mapped; // nvcc options that reach ptxas but that no JIT can apply
  std::vector<std::string> invalid;    // bad values: the build is refused
};
// -maxrregcount N / -maxrregcount=N / --maxrregcount[=| ]N, -lineinfo / --generate-line-info,
// -G / --device-debug, -Xptxas A,B / -Xptxas=A,B / --ptxas-options A,B / --ptxas-options=A,B.
// Every other nvcc option shapes the PTX itself (-use_fast_math, -D, -std) and is not recorded.
recorded_options ptxas_options_from_nvcc(const std::vector<std::string>& nvcc_args);

}  // namespace fatpack::core
