// fatpack::compile (fatpack/compile.hpp, docs/nvrtc.md): NVRTC behind the source cache, its output
// loaded through the same registry, selection, JIT and cache as packaged code (registry::add_image,
// load_library).
//
// Order per distinct architecture: validate the inputs -> locate NVRTC without loading it (its
// build-id is the compiler identity) -> scan the includes (the manifest) -> the source key ->
// sass_cache lookup (a hit: done, NVRTC never loaded) -> begin_compile (the per-key cross-process
// lock) -> lookup again -> load NVRTC -> SASS for the exact architecture when NVRTC knows it (stored
// under the key, with no driver in it: NVRTC's SASS does not depend on the driver), else PTX for the
// newest virtual architecture the device runs, loaded through fatpack's JIT; the SASS the JIT made is
// then stored under a second source key, the JIT key (the source key plus the JIT path and the
// driver: the JIT's output depends on the driver), looked up for exact hits only (never SASS another
// driver built). Both keys are looked up before NVRTC is loaded (which of the two paths a device takes
// is only known from NVRTC's architecture list); the compile lock is the source key's for both.
// Several architectures compile in parallel on core's pool.
#include "fatpack/compile.hpp"

#include "api/wiring.hpp"
#include "jit/include_scan.hpp"
#include "jit/nvrtc.hpp"
#include "jit/service.hpp"
#include "platform/device.hpp"
#include "platform/clock.hpp"
#include "registry/registry.hpp"

#include "fatpack/core/codec.hpp"
#include "fatpack/core/hex.hpp"
#include "fatpack/core/input.hpp"
#include "fatpack/core/thread_pool.hpp"

#include <xxhash.h>

#include <algorithm>
#include <ctime>
#include <mutex>
#include <optional>

namespace fatpack {

namespace {

using detail::nvrtc_input;
using detail::stopwatch;

constexpr std::size_t k_max_program_name = 1024;

error bad_input(std::string what) { return error{errc::invalid_argument, 0, "fatpack::compile: " + std::move(what), {}}; }

bool has_nul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// White space as NVRTC 13.0 drops it around an option: space, tab, newline, CR, VT, FF.
bool nvrtc_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// An include path of the request as NVRTC reads the "-I=" + path fatpack passes: the option's
// trailing white space dropped (its leading white space follows '=' and stays: NVRTC looks for
// " dir", and so does the scan).
std::string_view trailing_trimmed(std::string_view p) {
  while (!p.empty() && nvrtc_space(p.back())) p.remove_suffix(1);
  return p;
}

// An option as NVRTC 13.0 reads it: white space around it is dropped (" -arch=sm_80\t" is -arch=sm_80).
std::string_view trimmed(std::string_view o) {
  while (!o.empty() && nvrtc_space(o.front())) o.remove_prefix(1);
  return trailing_trimmed(o);
}

// The word after a joined -I as NVRTC reads it: spaces before it dropped, other white space kept
// ("-I\tinc" is the directory "\tinc").
std::string_view spaces_dropped(std::string_view w) {
  while (!w.empty() && w.front() == ' ') w.remove_prefix(1);
  return w;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Checks every input against its bound (docs/nvrtc.md "Limits").
status validate(const compile_request& r) {
  using namespace detail;
  if (r.source.empty()) return bad_input("the source is empty");
  if (r.source.size() > k_max_source_bytes)
    return bad_input("the source is " + std::to_string(r.source.size()) + " bytes, more than " +
                     std::to_string(k_max_source_bytes));
  if (has_nul(r.source)) return bad_input("the source contains a NUL byte");
  if (r.name.empty() || r.name.size() > k_max_program_name || has_nul(r.name))
    return bad_input("the program name must be 1 to " + std::to_string(k_max_program_name) + " bytes without NUL");
  if (r.headers.size() > k_max_headers)
    return bad_input(std::to_string(r.headers.size()) + " headers, more than " + std::to_string(k_max_headers));
  for (const auto& h : r.headers) {
    if (h.name.empty() || h.name.size() > k_max_option_bytes || has_nul(h.name))
      return bad_input("a header name must be 1 to " + std::to_string(k_max_option_bytes) + " bytes without NUL");
    if (h.contents.size() > k_max_source_bytes || has_nul(h.contents))
      return bad_input("header '" + h.name + "' is over " + std::to_string(k_max_source_bytes) +
                       " bytes or contains a NUL byte");
  }
  if (r.options.size() + r.include_paths.size() > k_max_options)
    return bad_input("more than " + std::to_string(k_max_options) + " options and include paths");
  if (r.name_expressions.size() > k_max_name_expressions)
    return bad_input("more than " + std::to_string(k_max_name_expressions) + " name expressions");
  auto check_words = [&](const std::vector<std::string>& words, const char* what) -> status {
    for (const auto& w : words)
      if (w.empty() || w.size() > k_max_option_bytes || has_nul(w))
        return bad_input(std::string("an ") + what + " must be 1 to " + std::to_string(k_max_option_bytes) +
                         " bytes without NUL");
    return {};
  };
  if (auto s = check_words(r.options, "option"); !s) return s;
  if (auto s = check_words(r.include_paths, "include path"); !s) return s;
  if (auto s = check_words(r.name_expressions, "name expression"); !s) return s;
  for (const auto& o : r.options) {
    const std::string_view t = trimmed(o);
    if (starts_with(t, "-arch") || starts_with(t, "--gpu-architecture") || t == "-code" || starts_with(t, "-code=") ||
        starts_with(t, "--gpu-code"))
      return bad_input("option '" + o + "': fatpack chooses the architecture per device; leave -arch out");
  }
  return {};
}

// The include paths the scan follows: the request's, and those given as -I options.
std::vector<std::string> include_dirs(const compile_request& r) {
  std::vector<std::string> dirs;
  for (const auto& p : r.include_paths) dirs.emplace_back(trailing_trimmed(p));
  for (std::size_t i = 0; i < r.options.size(); ++i) {
    const std::string_view o = trimmed(r.options[i]);
    if (starts_with(o, "--include-path=")) dirs.emplace_back(o.substr(15));
    else if (starts_with(o, "-I=")) dirs.emplace_back(o.substr(3));  // NVRTC reads "-I=dir" as "dir"
    else if (starts_with(o, "-I") && o.size() > 2) dirs.emplace_back(spaces_dropped(o.substr(2)));  // "-I  dir": "dir"
    else if ((o == "-I" || o == "--include-path") && i + 1 < r.options.size()) dirs.emplace_back(trimmed(r.options[i + 1]));
  }
  return dirs;
}

// The files --pre-include (-include) options name: NVRTC reads them before the source.
std::vector<std::string> pre_includes(const compile_request& r) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < r.options.size(); ++i) {
    const std::string_view o = trimmed(r.options[i]);
    if (starts_with(o, "--pre-include=")) names.emplace_back(o.substr(14));
    else if (starts_with(o, "-include=")) names.emplace_back(o.substr(9));
    else if ((o == "-include" || o == "--pre-include") && i + 1 < r.options.size()) names.emplace_back(trimmed(r.options[i + 1]));
  }
  names.erase(std::remove_if(names.begin(), names.end(), [](const std::string& n) { return n.empty(); }), names.end());
  return names;
}

void add_field(std::string& text, const char* tag, std::string_view value) {
  text += tag;
  text += std::to_string(value.size());  // length-prefixed: no value can fake a field boundary
  text += ':';
  text.append(value.data(), value.size());
  text += '\n';
}

std::string hash_of(std::string_view bytes) {
  return core::hex16(core::xxh3(core::byte_span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()))) +
         ":" + std::to_string(bytes.size());
}

// The PTX path's part of a key: what else decides the SASS fatpack's JIT makes from NVRTC's PTX. The
// PTX target (compute_<N>) is not here: it is decided by NVRTC's architecture list (the compiler
// identity) and the device's CC (the target), both in the key, and is not known before NVRTC is
// loaded.
struct jit_part {
  std::string backend;     // the JIT path asked for: "culink", "nvjitlink" (FATPACK_JIT_BACKEND)
  int driver_version = 0;  // cuDriverGetVersion; the cache's driver tier adds the build string
};

// Today's date in local time, as the preprocessor's __DATE__ reads the clock.
std::string local_date() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  char out[16] = {};
  if (!::localtime_r(&now, &tm) || std::strftime(out, sizeof out, "%Y-%m-%d", &tm) == 0) return "unknown";
  return out;
}

// The canonical text of everything that decides NVRTC's SASS for `arch` except the format version
// (the cache's code key adds it); with `jit`, that of the SASS the JIT makes from NVRTC's PTX.
// `date`: the local date when the program uses __DATE__, else "".
std::string source_key_text(const compile_request& r, const std::string& compiler, std::uint32_t arch,
                            const detail::include_manifest& manifest, const std::string& date,
                            const jit_part* jit = nullptr) {
  std::string t = "fatpack-nvrtc-source-key 1\n";
  add_field(t, "compiler=", compiler);
  add_field(t, "target=", "sm_" + std::to_string(arch));
  add_field(t, "name=", r.name);
  add_field(t, "source=", hash_of(r.source));
  for (const auto& h : r.headers) {
    add_field(t, "header=", h.name);
    add_field(t, "contents=", hash_of(h.contents));
  }
  for (const auto& p : r.include_paths) add_field(t, "include=", p);
  for (const auto& o : r.options) add_field(t, "option=", o);
  for (const auto& e : r.name_expressions) add_field(t, "name-expression=", e);
  add_field(t, "manifest=", manifest.text());
  if (!date.empty()) add_field(t, "date=", date);  // __DATE__: the code changes daily
  if (jit) {  // after the SASS key's fields: that key's text (and its stored entries) unchanged
    add_field(t, "path=", "ptx-jit");
    add_field(t, "jit=", jit->backend);
    add_field(t, "driver=", std::to_string(jit->driver_version));
  }
  return t;
}

// `driver_version` 0: NVRTC's SASS, valid across driver updates (no driver in the key). Else the JIT's
// SASS, whose entry is this driver's (the cache's second tier) and is looked up for exact hits only.
detail::jit_key cache_key_of(const std::string& text, std::uint32_t arch, int driver_version = 0) {
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  detail::jit_key k;
  k.backend = driver_version ? "nvrtc-jit" : "nvrtc";  // the code key reads "v1|nvrtc|..." / "v1|nvrtc-jit|..."
  k.ptx_xxh3 = h.low64;
  k.ptx_size = text.size();
  k.ptx_target = core::target{core::entry_kind::sass, arch, core::arch_variant::plain};
  k.target_arch = arch;
  k.options = "source=" + core::hex16(h.high64) + core::hex16(h.low64);
  k.driver_version = driver_version;
  return k;
}

std::string cuda_version_of(int driver_version) {
  return std::to_string(driver_version / 1000) + "." + std::to_string(driver_version % 1000 / 10);
}

// Why a result stored in a cache of this mode does not outlive the process ("" when it does). A
// memory-only cache keeps it for this process (a second compile in it hits), so it is stored, but
// the report must not say it was written to the cache.
std::string unkept_reason(cache_mode mode) {
  switch (mode) {
    case cache_mode::read_only: return "the cache is read-only (FATPACK_CACHE_READONLY, or not writable)";
    case cache_mode::memory_only:
      return "the cache is memory-only (no usable cache directory, docs/cache.md): kept for this process only";
    default: return {};
  }
}

// The PTX path's store, shared by the copies of one architecture's artifact (devices of one
// architecture): the first load that succeeds stores the JIT's SASS, then releases the compile lock.
struct jit_store {
  detail::jit_key key;
  std::string key_hex;
  std::shared_ptr<detail::compile_guard> guard;  // the source key's cross-process compile lock
  std::shared_ptr<detail::sass_cache> cache;
  cache_mode mode = cache_mode::read_write;
  std::mutex mu;
  bool done = false;
  bool stored = false;
  std::string not_cached;
};

// What one architecture's compile produced.
struct artifact {
  detail::sass_bytes code;  // cubin, or PTX; a cache hit's cubin may be a mapping of its entry
  compile_report report;           // the per-architecture part (device fields are set per device)
  std::shared_ptr<jit_store> store;  // PTX, cacheable: where the JIT's SASS goes once loaded
};

// Printable ASCII of the program name for package and module names.
std::string module_name_of(const std::string& name) {
  std::string m;
  for (char c : name.substr(0, 128)) m += (c > ' ' && c < 127) ? c : '_';
  return m;
}

result<artifact> build_for_arch(const compile_request& req, const compile_options& opts, std::uint32_t arch,
                                int driver_version) {
  stopwatch total;
  artifact a;
  compile_report& rep = a.report;
  rep.arch = arch;
  // Once this process has loaded NVRTC, its compiles all run that library, even where the file at its
  // path has changed since (an update while the process runs): the key names the loaded library, and
  // no search is needed. Before, the new file's identity keyed the old library's code.
  const detail::nvrtc_lib* const in_process = detail::loaded_nvrtc();
  auto where = in_process ? result<detail::nvrtc_location>(in_process->where) : detail::locate_nvrtc();
  if (!where) return where.error();
  rep.compiler = where->identity;
  rep.locate_ms = total.ms();

  const auto dirs = include_dirs(req);
  const auto pre = pre_includes(req);
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& h : req.headers) headers.emplace_back(h.name, h.contents);
  detail::include_manifest manifest = detail::scan_includes(req.source, headers, dirs, {}, req.name, pre);
  for (const auto& f : manifest.files) rep.dependencies.push_back(f.path);
  // A clock macro may come in through an option (-DSTAMP=__TIME__) or a name expression as well.
  for (const auto& o : req.options) detail::note_clock_macros(o, "option '" + o + "'", manifest);
  for (const auto& e : req.name_expressions) detail::note_clock_macros(e, "name expression '" + e + "'", manifest);
  const std::string date = manifest.date_macro ? local_date() : std::string();
  rep.scan_ms = total.ms() - rep.locate_ms;

  std::shared_ptr<detail::sass_cache> cache = detail::get_sass_cache();
  const cache_mode mode = cache_status().mode;
  const bool disabled = mode == cache_mode::disabled;
  const bool cacheable = opts.use_cache && manifest.complete && manifest.time_macro.empty() && !disabled;
  if (!opts.use_cache) rep.not_cached = "compile_options::use_cache is false";
  else if (disabled) rep.not_cached = "the cache is disabled (FATPACK_CACHE_DISABLE)";
  else if (!manifest.complete) rep.not_cached = "the include scan is incomplete: " + manifest.problem;
  else if (!manifest.time_macro.empty())
    rep.not_cached = "the program uses " + manifest.time_macro + ": its code may differ with every compile";
  const detail::jit_key key = cache_key_of(source_key_text(req, where->identity, arch, manifest, date), arch);
  // The PTX path's key, made on a miss of the first: a SASS hit costs what it did.
  std::optional<detail::jit_key> jkey;
  auto ptx_key = [&]() -> const detail::jit_key& {
    if (!jkey) {
      const jit_part part{detail::jit_backend_in_use() == jit_backend::nvjitlink ? "nvjitlink" : "culink",
                          driver_version};
      jkey = cache_key_of(source_key_text(req, where->identity, arch, manifest, date, &part), arch, driver_version);
    }
    return *jkey;
  };
  std::unique_ptr<detail::compile_guard> guard;
  if (cacheable) {
    rep.cache_key = key.options.substr(7);
    // NVRTC's SASS (any driver), else the JIT's SASS of this very driver (exact hits only).
    auto look = [&](bool& jit) {
      jit = false;
      auto h = cache->lookup(key);
      if (!h && (h = cache->find(ptx_key(), false))) jit = true;
      return h;
    };
    bool jit = false;
    stopwatch lookup;
    auto hit = look(jit);
    if (!hit) {
      // Another process compiling it (either path: one lock per source key): wait for its entry.
      guard = cache->begin_compile(key);
      hit = look(jit);
    }
    rep.lookup_ms = lookup.ms();
    if (hit) {
      rep.path = compile_path::cache_hit;
      rep.target = "sm_" + std::to_string(arch);
      rep.reason = "source cache hit (" + hit->where + "): NVRTC not loaded";
      if (jit) {
        rep.cache_key = ptx_key().options.substr(7);
        rep.reason = "source cache hit (" + hit->where + "), the SASS fatpack's JIT made from NVRTC's PTX with this "
                     "driver (CUDA " + cuda_version_of(driver_version) + "): NVRTC not loaded, no JIT";
      }
      a.code = std::move(hit->sass);
      rep.total_ms = total.ms();
      return a;
    }
  }

  const auto& loaded = detail::load_nvrtc();
  if (!loaded) return loaded.error();
  const detail::nvrtc_lib& lib = *loaded.value();
  // Loaded by this compile, from a file that changed after the search above (or loaded earlier by
  // another thread's compile that searched before this one): its code is not what the key names.
  const bool other_compiler = lib.where.identity != where->identity;
  rep.compiler = lib.where.identity;
  rep.nvrtc_version = std::to_string(lib.major) + "." + std::to_string(lib.minor);
  const bool sass = lib.supports(static_cast<int>(arch));
  int virt = 0;
  for (int v : lib.archs)
    if (v <= static_cast<int>(arch)) virt = std::max(virt, v);
  if (!sass && virt == 0)
    return error{errc::no_compatible_entry, 0,
                 "fatpack::compile: " + lib.identify() + " knows no architecture a device of CC " +
                     std::to_string(arch / 10) + "." + std::to_string(arch % 10) +
                     " can run (it knows sm_" + (lib.archs.empty() ? std::string("?") : std::to_string(lib.archs.front())) +
                     " and later); use an older NVRTC (FATPACK_LIBNVRTC)",
                 {}};
  rep.target = sass ? "sm_" + std::to_string(arch) : "compute_" + std::to_string(virt);
  rep.path = sass ? compile_path::nvrtc_sass : compile_path::nvrtc_ptx;
  rep.reason = sass ? "NVRTC " + rep.nvrtc_version + " compiles " + rep.target + ", the device's architecture"
                    : "NVRTC " + rep.nvrtc_version + " does not know sm_" + std::to_string(arch) + ": PTX for " +
                          rep.target + ", its newest virtual architecture the device runs, then fatpack's JIT";

  nvrtc_input in;
  in.source = req.source;
  in.program_name = req.name;
  in.headers = std::move(headers);
  // "-I=": NVRTC drops one '=' after -I, so "-I" + "=dir" would be "dir", not the path given.
  for (const auto& p : req.include_paths) in.options.push_back("-I=" + p);
  in.options.insert(in.options.end(), req.options.begin(), req.options.end());
  in.name_expressions = req.name_expressions;
  auto out = detail::nvrtc_compile(lib, in, rep.target);
  if (!out) return std::move(out).error();
  rep.nvrtc_ms = out->wall_ms;
  rep.log = std::move(out->log);
  rep.lowered_names = std::move(out->lowered);
  a.code = std::move(out->code);
  // NVRTC read the files after the scan: one edited in between made this code from contents the key
  // does not name, and storing it would serve the edited program for the old contents ever after. The
  // scan again (a miss only; cheap next to NVRTC) must see what the key was made of.
  bool storable = true;
  if (cacheable && other_compiler) {
    storable = false;
    rep.not_cached = "NVRTC changed between its search and its load: " + lib.where.path + " is now " +
                     lib.where.identity + ", the key was made for " + where->identity;
    rep.cache_key.clear();
  } else if (cacheable) {
    const detail::include_manifest after = detail::scan_includes(req.source, in.headers, dirs, {}, req.name, pre);
    if (after.text() != manifest.text()) {
      storable = false;
      std::string which;
      for (std::size_t i = 0; i < std::max(after.files.size(), manifest.files.size()) && which.empty(); ++i) {
        if (i >= after.files.size()) which = manifest.files[i].path;
        else if (i >= manifest.files.size() || after.files[i].path != manifest.files[i].path ||
                 after.files[i].state != manifest.files[i].state)
          which = after.files[i].path;
      }
      rep.not_cached = "a file reachable through #include changed during the compile: " + which;
      rep.cache_key.clear();  // the package is named by the code's hash, not by a key it does not match
    } else if (!date.empty() && local_date() != date) {
      // Midnight passed while NVRTC ran: its __DATE__ may be the new day's, the key holds the old.
      storable = false;
      rep.not_cached = "the date changed during the compile of a program that uses __DATE__";
      rep.cache_key.clear();
    }
  }
  // Code the registry refuses (-rdc=true's relocatable cubin, -dlto's empty one) is not stored: a
  // later process would hit it and fail the same way, without NVRTC's log. The same check add_image
  // makes (load_artifact then reports it); a miss only.
  if (sass && cacheable && storable &&
      (a.code.empty() ||
       !core::import_input(core::byte_span(a.code.data(), a.code.size()), "image '" + req.name + "'",
                           module_name_of(req.name), core::input_bytes::borrow, /*unknown_sass_ok=*/true))) {
    storable = false;  // not stored; load_artifact returns the registry's error
    rep.cache_key.clear();
  }
  if (sass && cacheable && storable) {
    const std::string unwritten = cache->store(key, core::byte_span(a.code.data(), a.code.size()));
    rep.not_cached = unkept_reason(mode);
    // A write that failed in a writable cache (a fan-out directory not this user's, a full disk):
    // before, the report said "stored" whatever became of the write.
    if (rep.not_cached.empty() && !unwritten.empty()) rep.not_cached = "the cache did not store it: " + unwritten;
    rep.stored = rep.not_cached.empty();
  } else if (!sass && cacheable && storable) {
    // The SASS comes from the load's JIT (load_artifact): stored then, the lock held until then.
    a.store = std::make_shared<jit_store>();
    a.store->key = ptx_key();
    a.store->key_hex = a.store->key.options.substr(7);
    a.store->guard = std::move(guard);
    a.store->cache = cache;
    a.store->mode = mode;
    rep.cache_key = a.store->key_hex;
  }
  guard.reset();  // after the store: a waiting process finds the entry
  rep.total_ms = total.ms();
  return a;
}

// The PTX ISA of a PTX text (".version 9.0"), for the error when the driver refuses it.
std::string ptx_version_of(const detail::sass_bytes& ptx) {
  const std::string_view t(reinterpret_cast<const char*>(ptx.data()), std::min<std::size_t>(ptx.size(), 4096));
  const std::size_t p = t.find(".version ");
  if (p == std::string_view::npos) return "?";
  const std::size_t end = t.find_first_of("\r\n", p);
  return std::string(t.substr(p + 9, end == std::string_view::npos ? std::string_view::npos : end - p - 9));
}

// The PTX path, after the load: the SASS the load's JIT made from NVRTC's PTX, asked of the JIT
// service again (it keeps every result: nothing is compiled again), is stored under the JIT key when
// this driver made it with its own JIT. Once per architecture (`st` is shared); the compile lock is
// released after the store, so a waiting process finds the entry.
void store_jit_sass(jit_store& st, compile_report& rep, const std::string& module, const std::string& package,
                    const detail::device& dev) {
  std::lock_guard<std::mutex> lock(st.mu);
  if (!st.done) {
    st.done = true;
    using sass_ptr = std::shared_ptr<const detail::sass_bytes>;
    result<sass_ptr> sass = [&]() -> result<sass_ptr> {
      const auto& set = detail::load_devices();  // loaded already: `dev` is one of its devices
      if (!set) return set.error();
      auto me = detail::registry::instance().find_module(module, package);
      if (!me) return me.error();
      if (me->entries.empty()) return error{errc::not_found, 0, "the module has no entry", {}};
      detail::jit_request jr;
      jr.package = me->package;
      jr.entry = me->entries.front();
      jr.drv = set.value()->drv;
      jr.dev = &dev;
      jr.module = module;
      auto r = detail::jit_service::instance().compile(jr);
      if (!r) return std::move(r).error();
      // Only this driver's own JIT (cuLink): the driver identity in the key covers it. SASS another
      // driver built (a JIT cache entry of the PTX, used while it is re-JIT-ed) or nvJitLink made
      // (its version is not in the key) is not stored.
      if (r->other_driver)
        return error{errc::jit_failed, 0,
                     "the JIT cache gave SASS another driver built (re-JIT-ed for this one in the background); a "
                     "later process stores this driver's",
                     {}};
      if (r->path.rfind("culink", 0) != 0)
        return error{errc::jit_failed, 0,
                     "the SASS was made by " + r->path + ", whose version is not in the source key; the JIT cache "
                     "keeps it",
                     {}};
      return r->sass;
    }();
    if (!sass) {
      st.not_cached = "PTX: not stored under the source key: " + sass.error().message;
    } else if (st.mode == cache_mode::read_only) {
      st.not_cached = unkept_reason(st.mode);
    } else {
      const std::string unwritten = st.cache->store(st.key, core::byte_span((*sass)->data(), (*sass)->size()));
      st.not_cached = unkept_reason(st.mode);
      if (st.not_cached.empty() && !unwritten.empty()) st.not_cached = "the cache did not store it: " + unwritten;
      st.stored = st.not_cached.empty();
    }
    st.guard.reset();
  }
  rep.stored = st.stored;
  rep.not_cached = st.not_cached;
}

// The code becomes a package of the registry's: a mapped cache hit's in place (the package's head
// written into the mapping's private room before the cubin: no copy, no fresh memory for it), other
// code copied once (add_image borrows it while it packs).
// `release`: the artifact's code, given up once it is packed (its only user).
result<compiled> load_artifact(const compile_request& req, const artifact& a, const detail::device& dev,
                               detail::sass_bytes* release = nullptr) {
  stopwatch sw;
  compiled c;
  c.report = a.report;
  c.report.device = dev.ordinal;
  const std::string module = module_name_of(req.name);
  // Named by the source key where the code is what the key names (it decides the code: no hash of
  // the cubin on a hit), else by the code's hash: NVRTC's PTX is not what the PTX path's key names
  // (the JIT's SASS is), and a later hit in this process registers that SASS under the key's name.
  const bool named_by_key = c.report.cache_key.size() >= 16 && c.report.path != compile_path::nvrtc_ptx;
  const std::string package =
      "nvrtc:" + module + ":" +
      (named_by_key ? c.report.cache_key.substr(0, 16)
                    : core::hex16(core::xxh3(core::byte_span(a.code.data(), a.code.size()))));
  const std::string ptx_version = c.report.path == compile_path::nvrtc_ptx ? ptx_version_of(a.code) : std::string();
  // A mapped cache hit: the package is made around the mapping's bytes, none copied; otherwise the
  // code is copied into a package of its own.
  stopwatch phase;
  const auto room = a.code.take_room();
  auto& reg = detail::registry::instance();
  if (auto s = room.first ? reg.add_image_in_place(a.code.keeper(), const_cast<std::uint8_t*>(a.code.data()),
                                                   a.code.size(), room.first, room.second, module, package,
                                                   a.code.checked_xxh3())
                          : reg.add_image(a.code.data(), a.code.size(), module, package, /*compiled_here=*/true);
      !s) {
    error e = s.error();
    e.message = "fatpack::compile: the code NVRTC made for " + c.report.target + " is not loadable: " + e.message;
    return e;
  }
  if (release) *release = detail::sass_bytes();
  c.report.register_ms = phase.ms();
  phase.restart();
  load_options lo;
  lo.device = dev.ordinal;
  lo.package = package;
  auto lib = load_library(module, lo);
  if (!lib) {
    error e = lib.error();
    if (c.report.path == compile_path::nvrtc_ptx)
      e.message = "fatpack::compile: NVRTC " + c.report.nvrtc_version + " made PTX ISA " + ptx_version +
                  " for " + c.report.target + "; the driver (CUDA " + std::to_string(dev.driver_version / 1000) + "." +
                  std::to_string(dev.driver_version % 1000 / 10) + ", PTX ISA up to " + dev.max_ptx_isa.str() +
                  ") could not load it on " + dev.identify() +
                  " (an NVRTC newer than the driver: update the driver, or point FATPACK_LIBNVRTC at an NVRTC no "
                  "newer than it): " + e.message;
    return e;
  }
  c.report.load_ms = phase.ms();
  c.library = std::move(lib.value());
  if (a.store) store_jit_sass(*a.store, c.report, module, package, dev);
  c.report.total_ms += sw.ms();
  return c;
}

result<const detail::device_set*> devices_or_error() {
  const auto& set = detail::load_devices();
  if (!set) return set.error();
  return set.value();
}

}  // namespace

const char* compile_path_name(compile_path p) noexcept {
  switch (p) {
    case compile_path::cache_hit: return "cache hit";
    case compile_path::nvrtc_sass: return "NVRTC SASS";
    case compile_path::nvrtc_ptx: return "NVRTC PTX + JIT";
  }
  return "?";
}

result<cu_kernel> compiled::kernel(std::string_view name) const {
  for (const auto& l : report.lowered_names)
    if (l.first == name) return library.kernel(l.second);
  return library.kernel(name);
}

result<compiled> compile(const compile_request& request, const compile_options& options) {
  if (auto s = validate(request); !s) return s.error();
  auto set = devices_or_error();
  if (!set) return set.error();
  auto dev = detail::pick_device(*set.value(), options.device);
  if (!dev) return dev.error();
  detail::wire_default_cache();
  auto a = build_for_arch(request, options, dev.value()->arch, dev.value()->driver_version);
  if (!a) return std::move(a).error();
  return load_artifact(request, a.value(), *dev.value(), &a.value().code);
}

std::vector<result<compiled>> compile_for_devices(const compile_request& request, const std::vector<int>& devices) {
  std::vector<result<compiled>> out;
  auto fail_all = [&](const error& e, std::size_t n) {
    for (std::size_t i = 0; i < std::max<std::size_t>(n, 1); ++i) out.emplace_back(e);
    return std::move(out);
  };
  if (auto s = validate(request); !s) return fail_all(s.error(), devices.size());
  auto set = devices_or_error();
  if (!set) return fail_all(set.error(), devices.size());
  std::vector<const detail::device*> devs;
  if (devices.empty())
    for (const auto& d : set.value()->devices) devs.push_back(&d);
  for (int ordinal : devices) {
    auto d = detail::pick_device(*set.value(), ordinal);
    devs.push_back(d ? d.value() : nullptr);
    if (!d) out.emplace_back(d.error());
  }
  if (!out.empty()) {  // an ordinal out of range: every result says which
    error e = out.front().error();
    out.clear();
    return fail_all(e, devs.size());
  }
  detail::wire_default_cache();
  // One compile per distinct architecture, in parallel.
  std::vector<std::uint32_t> archs;
  std::vector<int> drivers;  // one driver per process: the same for every device
  for (const auto* d : devs)
    if (std::find(archs.begin(), archs.end(), d->arch) == archs.end()) {
      archs.push_back(d->arch);
      drivers.push_back(d->driver_version);
    }
  std::vector<std::optional<result<artifact>>> built(archs.size());
  const compile_options opts;
  core::parallel_for(archs.size(), static_cast<unsigned>(archs.size()), [&](std::size_t i) {
    built[i].emplace(build_for_arch(request, opts, archs[i], drivers[i]));
  });
  for (const auto* d : devs) {
    const std::size_t i = static_cast<std::size_t>(std::find(archs.begin(), archs.end(), d->arch) - archs.begin());
    const result<artifact>& a = *built[i];
    if (!a) out.emplace_back(a.error());
    else out.push_back(load_artifact(request, a.value(), *d));  // devices of one architecture share it
  }
  return out;
}

}  // namespace fatpack
