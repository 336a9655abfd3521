// Kernel-granular JIT (docs/runtime.md "Kernel-granular JIT"): a PTX entry that needs the JIT is
// split into independent pieces (core::split_ptx, docs/splitting.md), each compiled, cached and
// loaded as a module of its own, so that the first kernel a program asks for waits for its own
// piece only, and the pieces compile in parallel on the JIT pool.
//
// Policy:
//  - Applies to load_module of a standalone PTX entry (not a link group, not LTO-IR, not a library:
//    cuLibrary has no way to add a module later). A module the splitter leaves whole (relocatable
//    PTX, -G, shared state everywhere, one kernel) is compiled whole, as before; the report says why.
//  - The module stays one fatpack::module. Its kernels and globals are looked up in the piece that
//    holds them; that piece is compiled (or waited for) and loaded into the module's context on first
//    use, outside the module's lock, so a lookup never waits for another kernel's piece.
//  - piece_policy::background (the default) queues every piece's compile on the pool at load time, in
//    the module's order; a lookup takes its piece over when the pool has not started it. on_demand
//    compiles a piece only when one of its kernels or globals is asked for. off compiles whole.
//  - Each piece is a JIT request of its own (jit/service.hpp): its own cache key (the XXH3 of its
//    text, and the entry's declared raw XXH3 and size: a package whose PTX changed misses even where
//    its plan did not), in-process and cross-process single flight, so a later process reads only
//    the pieces it uses.
//  - Loading a piece relaxes the thread's stream-capture mode for the cuModuleLoadDataEx
//    (cuThreadExchangeStreamCaptureMode): a module load enqueues nothing, and a kernel first asked
//    for while the application captures a stream into a graph must not invalidate the capture.
#pragma once

#include "jit/service.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fatpack::detail {

enum class piece_policy { off, on_demand, background };
// fatpack::set_jit_pieces wins once called; else FATPACK_JIT_PIECES=off|on_demand|background; else
// background. An unknown value is background (and said once at warn).
piece_policy piece_policy_in_use();
void set_piece_policy_override(piece_policy p);
// FATPACK_JIT_PIECE_GROUPS=N: at most N pieces balanced by PTX bytes; unset or 0: one per kernel
// where nothing is shared (what the splitter calls per_kernel). For measuring the granularity.
std::size_t piece_groups_in_use();

struct piece_slot {
  std::shared_ptr<const jit_piece> src;
  std::vector<std::string> kernels, globals;
  std::shared_ptr<jit_task> task;  // queued at load (background policy); null until then otherwise

  std::mutex mu;  // guards what follows; held while this piece compiles and loads
  CUmodule mod = nullptr;
  double jit_ms = 0, load_ms = 0;
  bool reused = false;  // the SASS came from the cache or an earlier compile
  std::string path;     // the JIT path, as jit_result::path
};

struct piece_set {
  jit_request base;  // the whole entry's request (piece unset)
  std::vector<std::unique_ptr<piece_slot>> slots;
  std::unordered_map<std::string, std::uint32_t> by_symbol;  // kernels and globals -> slot
  static constexpr std::uint32_t none = ~std::uint32_t(0);
  std::uint32_t find(const std::string& symbol) const;
  // The slots whose module is loaded now (for the destructor and tests).
  std::size_t loaded() const;
};

// One entry's split, made once per process for (package, entry, granularity) and shared by loads in
// several contexts, warm() and `fatpack warm`.
struct entry_split {
  std::vector<std::shared_ptr<const jit_piece>> sources;  // two or more; empty: compiled whole
  std::vector<std::vector<std::string>> kernels, globals;  // per piece
  std::string why_whole;  // when sources is empty
  double decompress_ms = 0, split_ms = 0;
  bool from_plan = false;  // the package's piece plan (docs/format.md §4.2): nothing split or decompressed
  bool is_split() const { return sources.size() >= 2; }
};

// Decompresses `whole`'s PTX entry and splits it (or returns the split made before). An error only
// for a damaged entry; a module that stays whole has no sources and says why.
result<std::shared_ptr<const entry_split>> split_entry(const jit_request& whole, std::size_t groups);

// True when `whole` is a candidate for pieces under `p` at all (a standalone PTX entry, not for a
// library).
bool may_split(const jit_request& whole, piece_policy p, bool library);

// The slots of a module loaded from `split`.
std::shared_ptr<piece_set> make_piece_set(const jit_request& whole, const entry_split& split);

// The requests that compile `whole` as a load would: one per piece when the policy splits it, else
// `whole` itself (warm-up, `fatpack warm`).
result<std::vector<jit_request>> requests_as_loaded(const jit_request& whole);

// Queues every piece's compile on the JIT pool (the background policy).
void queue_pieces(piece_set& set);

// The PTX bytes `req` compiles (the piece's, else the whole entry's): the best estimate of its JIT
// time there is.
std::uint64_t jit_size(const jit_request& req);

// Orders compiles for the pool, largest first (stable): the pool's last compiles are then the small
// ones, so a batch is done soon after its total work divided by the threads, not a large JIT later
// on one thread while the others idle. warm() orders every module's compiles so (queue_pieces keeps
// a module's order: a load's first kernels matter more there).
void largest_first(std::vector<jit_request>& reqs);

// Compiles (or waits for) the smallest piece, so that a load finds out whether this driver takes
// this PTX at all (an ISA it does not know, a JIT that fails) before it returns, and goes on to the
// next candidate as for a whole module. The result stays for the piece's first use. `probe`, when
// given: whether that piece's SASS was reused, and whether it came from the cache (the load report's
// jit_reused / jit_from_cache for a module in pieces).
struct piece_probe {
  bool reused = false, from_cache = false;
};
status probe_pieces(piece_set& set, piece_probe* probe = nullptr);

// The CUmodule of slot `i`, loaded into `ctx`: compiled (or taken from the cache, or waited for)
// first. An error names the piece, its kernels, the device and the driver; a later call tries again.
result<CUmodule> load_piece(piece_set& set, std::uint32_t i, CUcontext ctx);

// Unloads every loaded piece (the caller checked that `ctx` is still alive).
void unload_pieces(piece_set& set, CUcontext ctx);

}  // namespace fatpack::detail
