// Kernel-granular JIT (see pieces.hpp for the policy).
#include "load/pieces.hpp"

#include "platform/clock.hpp"
#include "platform/log.hpp"
#include "platform/os.hpp"
#include "registry/registry.hpp"

#include "fatpack/core/codec.hpp"
#include "fatpack/core/hex.hpp"
#include "fatpack/core/ptx_split.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace fatpack::detail {

namespace {

std::atomic<int> g_policy{-1};  // -1: not set through the API (FATPACK_JIT_PIECES decides)

piece_policy policy_from_env() {
  const char* v = os::getenv("FATPACK_JIT_PIECES");
  if (!v || !*v || std::strcmp(v, "background") == 0) return piece_policy::background;
  if (std::strcmp(v, "on_demand") == 0) return piece_policy::on_demand;
  if (std::strcmp(v, "off") == 0) return piece_policy::off;
  static std::atomic<bool> warned{false};
  log_once(warned, log_level::warn,
           "FATPACK_JIT_PIECES='" + core::printable_text(v, 64) + "' is not off, on_demand or background; using background");
  return piece_policy::background;
}

// "module 'm' piece 3 of 40 (kernel k_2, 4 more)": what a piece is called in messages and the
// driver's log (jit_request::module).
std::string piece_name(const piece_set& set, std::uint32_t i) {
  const piece_slot& s = *set.slots[i];
  std::string n = set.base.module + " piece " + std::to_string(i + 1) + " of " + std::to_string(set.slots.size());
  if (!s.kernels.empty()) {
    n += " (kernel " + core::printable_text(s.kernels.front(), 200);
    if (s.kernels.size() > 1) n += ", " + std::to_string(s.kernels.size() - 1) + " more";
    n += ")";
  }
  return n;
}

jit_request piece_request(const piece_set& set, std::uint32_t i) {
  jit_request req = set.base;
  req.piece = set.slots[i]->src;
  req.module = piece_name(set, i);
  return req;
}

// cuModuleLoadDataEx of `image` in `ctx`, with the driver's error log.
CUresult load_in(const driver& d, CUcontext ctx, const void* image, CUmodule& mod, std::string& log) {
  constexpr std::size_t log_size = 16 * 1024;
  auto err = std::make_unique<char[]>(log_size);
  err[0] = 0;
  CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {err.get(), reinterpret_cast<void*>(static_cast<std::uintptr_t>(log_size - 1))};
  scoped_context current(d, ctx);
  if (!current.ok()) return CUDA_ERROR_INVALID_CONTEXT;
  relaxed_capture relaxed(d);
  CUresult r = d.cuModuleLoadDataEx(&mod, image, 2, keys, vals);
  if (r != CUDA_SUCCESS) {
    mod = nullptr;
    log.assign(err.get(), strnlen(err.get(), log_size));
  }
  return r;
}

std::string where(const piece_set& set, std::uint32_t i) {
  const auto& b = set.base;
  return piece_name(set, i) + " of package '" + b.package->name + "' on " + b.dev->identify() + ", driver " +
         b.drv->identify();
}

}  // namespace

piece_policy piece_policy_in_use() {
  const int v = g_policy.load();
  if (v >= 0) return static_cast<piece_policy>(v);
  return policy_from_env();
}

void set_piece_policy_override(piece_policy p) { g_policy.store(static_cast<int>(p)); }

std::size_t piece_groups_in_use() {
  const char* v = os::getenv("FATPACK_JIT_PIECE_GROUPS");
  if (!v || !*v) return 0;
  char* end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (*end || v[0] == '-' || n > 1000000) {
    static std::atomic<bool> warned{false};
    log_once(warned, log_level::warn,
             "FATPACK_JIT_PIECE_GROUPS='" + core::printable_text(v, 64) +
                 "' is not a number of pieces up to 1000000; splitting per kernel");
    return 0;
  }
  return n;
}

std::uint32_t piece_set::find(const std::string& symbol) const {
  auto it = by_symbol.find(symbol);
  return it == by_symbol.end() ? none : it->second;
}

std::size_t piece_set::loaded() const {
  std::size_t n = 0;
  for (const auto& s : slots) {
    std::lock_guard<std::mutex> lock(s->mu);
    n += s->mod != nullptr;
  }
  return n;
}

namespace {

// The splits made so far, by (package, entry, groups). The package is held weakly: a package
// unregistered and another registered at its address is not mistaken for it.
struct split_memo_entry {
  std::weak_ptr<const registered_package> package;
  std::shared_ptr<const entry_split> split;
};
std::mutex& memo_mu() {
  static std::mutex mu;
  return mu;
}
std::unordered_map<std::string, split_memo_entry>& memo() {
  static auto* m = new std::unordered_map<std::string, split_memo_entry>;  // leaked: used until exit
  return *m;
}

result<std::shared_ptr<const entry_split>> split_now(const jit_request& req, std::size_t groups) {
  auto out = std::make_shared<entry_split>();
  const auto& e = req.package->view.entries().at(req.entry);
  stopwatch sw;
  // raw_size is bounded by the package reader; an allocation that still fails throws bad_alloc,
  // which the caller's load turns into an error like any other.
  std::string text(static_cast<std::size_t>(e.raw_size), '\0');
  if (auto s = req.package->view.decompress_into(req.entry, reinterpret_cast<std::uint8_t*>(text.data()),
                                                 std::min(8u, os::hardware_threads()));
      !s)
    return s.error();
  out->decompress_ms = sw.ms();
  stopwatch split_clock;
  core::ptx_split_options o;
  if (groups) {
    o.mode = core::ptx_split_options::granularity::groups;
    o.groups = groups;
  }
  auto split = core::split_ptx(core::byte_span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()),
                               req.module, o);
  out->split_ms = split_clock.ms();
  if (!split) {
    // Text the splitter cannot read is left to the JIT, whose error names the fault.
    out->why_whole = "not split: " + split.error().message;
    return std::shared_ptr<const entry_split>(std::move(out));
  }
  if (split->pieces.size() < 2) {
    out->why_whole = split->unsplit_reason.empty() ? "one piece (a single kernel, or kernels that all share state)"
                                                   : "not split: " + split->unsplit_reason;
    return std::shared_ptr<const entry_split>(std::move(out));
  }
  const auto count = std::uint32_t(split->pieces.size());
  for (auto& p : split->pieces) {
    auto src = std::make_shared<jit_piece>();
    src->xxh3 = core::xxh3(core::byte_span(reinterpret_cast<const std::uint8_t*>(p.text.data()), p.text.size()));
    src->size = p.text.size();
    src->ptx = std::move(p.text);
    src->ptx.push_back('\0');
    src->index = std::uint32_t(out->sources.size());
    src->count = count;
    out->sources.push_back(std::move(src));
    out->kernels.push_back(std::move(p.kernels));
    out->globals.push_back(std::move(p.globals));
  }
  return std::shared_ptr<const entry_split>(std::move(out));
}

// The entry's raw PTX, decompressed once for all its pieces (on the first piece a cache does not
// have) and kept while any piece may still need it.
struct plan_source {
  package_ptr package;
  std::size_t entry = 0;
  std::string module;
  std::mutex mu;
  std::shared_ptr<const std::string> raw;  // guarded by mu

  result<std::shared_ptr<const std::string>> text() {
    std::lock_guard<std::mutex> lock(mu);
    if (raw) return raw;
    const auto& e = package->view.entries().at(entry);
    auto t = std::make_shared<std::string>(static_cast<std::size_t>(e.raw_size), '\0');
    if (auto s = package->view.decompress_into(entry, reinterpret_cast<std::uint8_t*>(t->data()),
                                               std::min(8u, os::hardware_threads()));
        !s)
      return s.error();
    raw = std::move(t);
    return raw;
  }
};

// The split the package recorded (docs/format.md §4.2): nothing is decompressed or split now; each
// piece's text is made from the plan on its first miss, and checked against the plan's XXH3.
std::shared_ptr<const entry_split> split_from_plan(const jit_request& req) {
  const auto& e = req.package->view.entries().at(req.entry);
  const core::piece_plan& plan = e.plan;
  auto out = std::make_shared<entry_split>();
  out->from_plan = true;
  auto source = std::make_shared<plan_source>();
  source->package = req.package;
  source->entry = req.entry;
  source->module = req.module;
  const auto count = std::uint32_t(plan.pieces.size());
  for (std::uint32_t i = 0; i < count; ++i) {
    const core::piece_plan_piece& pp = plan.pieces[i];
    auto src = std::make_shared<jit_piece>();
    src->xxh3 = pp.xxh3;
    src->size = pp.size;
    src->index = i;
    src->count = count;
    src->make = [source, &plan, i]() -> result<std::string> {
      auto raw = source->text();
      if (!raw) return raw.error();
      core::plan_piece_text made = core::rebuild_plan_piece(**raw, plan, i);
      if (!made.matches)
        return error{errc::bad_package, 0,
                     "package '" + source->package->name + "', module '" + source->module + "': piece " +
                         std::to_string(i + 1) + " of the package's piece plan does not match its PTX",
                     {}};
      made.text.push_back('\0');
      return std::move(made.text);
    };
    out->sources.push_back(std::move(src));
    std::vector<std::string> kernels;
    for (std::uint32_t k : pp.kernels) kernels.emplace_back(e.kernels.at(k));
    out->kernels.push_back(std::move(kernels));
    out->globals.push_back(pp.globals);
  }
  return out;
}

}  // namespace

result<std::shared_ptr<const entry_split>> split_entry(const jit_request& whole, std::size_t groups) {
  const std::string key = std::to_string(reinterpret_cast<std::uintptr_t>(whole.package.get())) + "/" +
                          std::to_string(whole.entry) + "/" + std::to_string(groups);
  {
    std::lock_guard<std::mutex> lock(memo_mu());
    auto it = memo().find(key);
    if (it != memo().end()) {
      if (it->second.package.lock() == whole.package) return it->second.split;
      memo().erase(it);
    }
  }
  // Split outside the lock (hundreds of milliseconds for a large module); two threads splitting the
  // same entry at once both finish and the first one's result is kept. A per-kernel split the
  // package recorded at pack time is used as it is.
  const auto& e = whole.package->view.entries().at(whole.entry);
  auto split = groups == 0 && !e.plan.empty() ? result<std::shared_ptr<const entry_split>>(split_from_plan(whole))
                                              : split_now(whole, groups);
  if (!split) return split;
  std::lock_guard<std::mutex> lock(memo_mu());
  auto [it, fresh] = memo().emplace(key, split_memo_entry{whole.package, *split});
  return it->second.split;
}

bool may_split(const jit_request& whole, piece_policy p, bool library) {
  if (p == piece_policy::off || library || whole.piece || whole.bypass_cache) return false;
  const auto& e = whole.package->view.entries().at(whole.entry);
  return e.target.kind == core::entry_kind::ptx && !e.in_link_group();
}

std::shared_ptr<piece_set> make_piece_set(const jit_request& whole, const entry_split& split) {
  auto set = std::make_shared<piece_set>();
  set->base = whole;
  set->slots.reserve(split.sources.size());
  for (std::uint32_t i = 0; i < split.sources.size(); ++i) {
    auto slot = std::make_unique<piece_slot>();
    slot->src = split.sources[i];
    slot->kernels = split.kernels[i];
    slot->globals = split.globals[i];
    for (const auto& k : slot->kernels) set->by_symbol.emplace(k, i);
    for (const auto& g : slot->globals) set->by_symbol.emplace(g, i);
    set->slots.push_back(std::move(slot));
  }
  return set;
}

result<std::vector<jit_request>> requests_as_loaded(const jit_request& whole) {
  std::vector<jit_request> out;
  if (!may_split(whole, piece_policy_in_use(), false)) {
    out.push_back(whole);
    return out;
  }
  auto split = split_entry(whole, piece_groups_in_use());
  if (!split) return split.error();
  if (!(*split)->is_split()) {
    out.push_back(whole);
    return out;
  }
  auto set = make_piece_set(whole, **split);
  for (std::uint32_t i = 0; i < set->slots.size(); ++i) out.push_back(piece_request(*set, i));
  return out;
}

std::uint64_t jit_size(const jit_request& req) {
  if (req.piece) return req.piece->size;
  return req.package->view.entries().at(req.entry).raw_size;
}

void largest_first(std::vector<jit_request>& reqs) {
  std::stable_sort(reqs.begin(), reqs.end(),
                   [](const jit_request& a, const jit_request& b) { return jit_size(a) > jit_size(b); });
}

void queue_pieces(piece_set& set) {
  auto& jit = jit_service::instance();
  // In the module's order, not largest first as warm() queues: a program that asks for kernels one
  // after another in the order they are declared then finds the first ones compiling already. Queued
  // largest first, those were anywhere in the queue and each one asked for compiled only then, on the
  // asking thread, one after another: 5 kernels of a 400-kernel module took 533 ms on the H100
  // against 194 ms in this order, side by side, and all 400 the same within the runs' spread
  // (docs/benchmarks.md). A kernel asked for before its turn does not wait for it: function() takes
  // its queued piece over.
  for (std::uint32_t i = 0; i < set.slots.size(); ++i) {
    auto t = jit.enqueue(piece_request(set, i));
    std::lock_guard<std::mutex> lock(set.slots[i]->mu);
    if (t) set.slots[i]->task = std::move(*t);  // else compiled on first use
  }
}

status probe_pieces(piece_set& set, piece_probe* probe) {
  std::uint32_t smallest = 0;
  for (std::uint32_t i = 1; i < set.slots.size(); ++i)
    if (set.slots[i]->src->size < set.slots[smallest]->src->size) smallest = i;
  piece_slot& slot = *set.slots[smallest];
  std::shared_ptr<jit_task> task;
  {
    std::lock_guard<std::mutex> lock(slot.mu);
    task = slot.task;
  }
  auto& jit = jit_service::instance();
  // Queued (background): waited for, or compiled here if the pool has not started it. Not queued
  // (on_demand): compiled on this thread, so on_demand starts no pool thread; the piece's later
  // load_piece gets the same result from the service's single flight.
  auto r = task ? jit.wait(task) : jit.compile(piece_request(set, smallest));
  if (!r) {
    std::lock_guard<std::mutex> lock(slot.mu);
    slot.task.reset();
    return std::move(r).error();
  }
  if (probe) {
    probe->reused = r->reused;
    probe->from_cache = r->from_cache;
  }
  return {};
}

result<CUmodule> load_piece(piece_set& set, std::uint32_t i, CUcontext ctx) {
  piece_slot& slot = *set.slots.at(i);
  std::lock_guard<std::mutex> lock(slot.mu);
  if (slot.mod) return slot.mod;
  auto& jit = jit_service::instance();
  jit_request req = piece_request(set, i);
  const driver& d = *set.base.drv;

  stopwatch sw;
  std::shared_ptr<jit_task> task = std::move(slot.task);  // used once: a failed one is not kept
  result<jit_result> jr = task ? jit.wait(task) : jit.compile(req);
  if (!jr) {
    error e = std::move(jr).error();
    e.message = "cannot compile " + where(set, i) + ": " + e.message;
    return e;
  }
  const double waited = sw.ms();
  CUmodule mod = nullptr;
  std::string log;
  stopwatch load_clock;
  CUresult r = load_in(d, ctx, jr->sass->data(), mod, log);
  if (r != CUDA_SUCCESS && jr->from_cache) {
    // SASS from the cache that this driver refuses (another driver's): compiled again, as the
    // loader does for a whole module.
    log_line(log_level::warn, "JIT cache: the driver refused the cached SASS of " + req.module + " (" +
                                  d.call_failed("cuModuleLoadDataEx", r) + "); compiling it again");
    jit.forget(req);
    req.bypass_cache = true;
    jr = jit.compile(req);
    if (!jr) {
      error e = std::move(jr).error();
      e.message = "cannot compile " + where(set, i) + " again after the driver refused the cached SASS: " + e.message;
      return e;
    }
    log.clear();
    r = load_in(d, ctx, jr->sass->data(), mod, log);
  }
  if (r != CUDA_SUCCESS)
    return cuda_error(errc::load_failed, r, "cannot load " + where(set, i) + ": " + d.call_failed("cuModuleLoadDataEx", r),
                      std::move(log));
  slot.mod = mod;
  slot.load_ms = load_clock.ms();
  slot.reused = jr->reused;
  slot.jit_ms = jr->reused ? waited : jr->jit_ms;
  slot.path = jr->path;
  log_line(log_level::debug, "loaded " + req.module + ": " +
                                 (!slot.reused ? "JIT" : jr->from_cache ? "SASS reused from the JIT cache" : "SASS reused") + " " +
                                 std::to_string(slot.jit_ms) + " ms via " + slot.path + ", load " +
                                 std::to_string(slot.load_ms) + " ms");
  return mod;
}

void unload_pieces(piece_set& set, CUcontext ctx) {
  const driver& d = *set.base.drv;
  scoped_context current(d, ctx);
  for (auto& s : set.slots) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->mod) (void)d.cuModuleUnload(s->mod);
    s->mod = nullptr;
  }
}

}  // namespace fatpack::detail
