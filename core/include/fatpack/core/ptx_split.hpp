// Splitting one PTX module into independent pieces, each a complete PTX module that ptxas (or the
// driver's JIT) compiles on its own: the first part of kernel-granular JIT (issue 13; what is split,
// kept together and refused: docs/splitting.md).
//
// Each piece holds some of the module's kernels (`.entry`) and everything they need: the header
// (`.version`, `.target`, `.address_size`, and the comments before it), every `.file`, the `.func`
// callees they reach (copied into every piece that reaches them), the declarations they use
// (`.extern .func vprintf`, `.extern .shared`), and the module-scope state they use (`.global`,
// `.const`, textures, surfaces, samplers). Kernels that share state, or that could pass function
// pointers to each other, are in the same piece: state exists once per module, so it must exist once
// among the pieces.
//
// Bounded and safe on hostile text: limits below, no recursion, errors as values. What the splitter
// does not understand, or cannot split safely (relocatable -rdc PTX, -G debug sections, ...), comes
// back as one piece, the module unchanged, with the reason; never as a wrong split.
#pragma once

#include "fatpack/core/error.hpp"
#include "fatpack/core/package.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fatpack::core {

struct ptx_split_options {
  enum class granularity {
    per_kernel,  // as many pieces as the sharing allows: one per kernel where nothing is shared
    groups,      // at most `groups` pieces, balanced by PTX bytes (largest first into the lightest)
  };
  granularity mode = granularity::per_kernel;
  std::size_t groups = 1;  // granularity::groups only; 0 is an invalid_argument error
  // Limits: a module larger than max_input_bytes is an error; one whose split would write more than
  // max_output_factor times its size (callees copied into many pieces), or whose graph walks would
  // take more than max_walk_steps steps, comes back as one piece with the reason.
  std::size_t max_input_bytes = std::size_t(512) << 20;
  std::size_t max_output_factor = 16;
  std::size_t max_walk_steps = std::size_t(1) << 26;
};

struct ptx_piece {
  std::string text;                  // a complete PTX module
  std::vector<std::string> kernels;  // its `.entry` names, in the module's order
  // The module-scope state it defines (`.global`/`.const` variables, textures, surfaces, samplers):
  // each in exactly one piece, so a lookup by name (cuModuleGetGlobal) knows which piece to ask.
  // Empty for a module that was not split.
  std::vector<std::string> globals;
  // Where the text comes from (empty for a module that was not split): the module's bytes
  // [0, header_end) and these byte ranges [first, second) of the module, as assemble_ptx_piece puts
  // them together. A package records them (docs/format.md §4.2) so a reader rebuilds the piece
  // without splitting again.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
};

struct ptx_split_result {
  std::vector<ptx_piece> pieces;  // at least one; every kernel of the module in exactly one piece
  // Empty when the module was split as asked; otherwise why it was not (then pieces holds one piece:
  // the module's text, without trailing NULs or a byte order mark). A module with one kernel, or
  // with kernels that all share state, is split as asked and may still be one piece.
  std::string unsplit_reason;
  std::uint64_t header_end = 0;  // the header's end (see ptx_piece::ranges); 0 when not split
};

// The text of a piece (docs/splitting.md): module[0, header_end), a newline, then for each range a
// newline, module[first, second) and a newline. The caller checked every bound against the module.
std::string assemble_ptx_piece(std::string_view module, std::uint64_t header_end,
                               const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges);
// Piece `i` (< plan.pieces.size()) of an entry's piece plan (docs/format.md §4.2) rebuilt from the entry's raw PTX `module`
// with assemble_ptx_piece, and whether it is the piece the plan declares (its size and XXH3). A range
// outside `module` (a plan checked against another size) makes no text and does not match.
struct plan_piece_text {
  std::string text;
  std::uint64_t xxh3 = 0;  // of text
  bool matches = false;
};
plan_piece_text rebuild_plan_piece(std::string_view module, const piece_plan& plan, std::size_t i);

// The package's record of a per-kernel split of `ptx` (an entry's raw PTX, whose kernels are
// `kernels` in the entry's order): docs/format.md §4.2. Empty when the module stays one piece or
// cannot be split (the runtime then compiles it whole, or splits it itself with other options).
piece_plan make_piece_plan(byte_span ptx, const std::vector<std::string>& kernels, std::string_view source);

// Its size without building it (same bounds).
std::uint64_t ptx_piece_size(std::uint64_t header_end, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges);

// Splits the PTX text `bytes` (trailing NULs and a leading byte order mark ignored). Errors (never
// thrown): text that is not PTX or is malformed (errc::malformed, naming `source` and the line), a
// module over max_input_bytes (errc::unsupported), groups == 0 (errc::invalid_argument).
result<ptx_split_result> split_ptx(byte_span bytes, std::string_view source, const ptx_split_options& options = {});

}  // namespace fatpack::core
