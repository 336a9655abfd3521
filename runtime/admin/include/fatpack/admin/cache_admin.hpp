// The cache's administrative API, for the `fatpack` CLI (`fatpack cache ...`, `fatpack warm`) and for
// tests. Internal (the fatpack_cache_admin target, not installed); it includes no Boost or LZ4 header,
// so packager/ includes it and links fatpack_cache_admin without seeing runtime/src. Every call returns errors as values naming the directory / entry / key; none
// throws.
//
// Usage (what the CLI commands map to):
//
//   namespace fc = fatpack::detail::cache;
//   // --path DIR, or the per-user default ($FATPACK_CACHE_PATH, $XDG_CACHE_HOME/fatpack, ~/.cache/fatpack)
//   std::string dir = path_flag.empty() ? fc::default_cache_dir() : path_flag;
//   auto c = fc::admin::open(dir, /*read_only=*/true);      // stats, list, verify: read-only
//   if (!c) { print(c.error().message); return 1; }
//   fc::disk_stats s = (*c)->stats();                        // fatpack cache stats
//   std::vector<fc::entry_info> l = (*c)->list();            // fatpack cache list (sorted by last use)
//   std::vector<fc::entry_problem> p = (*c)->verify(false);  // fatpack cache verify (exit 1 if !p.empty())
//
//   auto w = fc::admin::open(dir, /*read_only=*/false);     // prune, clear, warm, verify --repair
//   (*w)->verify(true);                                      // fatpack cache verify --repair
//   fc::prune_result r = (*w)->prune(max_bytes);             // fatpack cache prune [--max-size N]
//                                                            //   (fc::parse_max_size)
//   fatpack::status st = (*w)->clear();                      // fatpack cache clear
//
//   // fatpack warm [--path DIR] [--target sm_86,sm_100,...] PACKAGE...
//   fc::warm_options o;
//   o.targets = {86, 100};                                   // parse with fc::parse_warm_target("sm_86")
//   o.progress = [](const fc::warm_item& it, std::size_t done, std::size_t total) { ... };
//   auto items = fc::warm_packages(**w, {"app.fpk"}, o);     // result<std::vector<warm_item>>
//
// JSON is the CLI's business: every struct below is plain data (strings, integers, bools).
//
// The driver: warm_packages() loads it like the runtime does (FATPACK_LIBCUDA, else libcuda.so.1; the
// fake driver in tests) and needs one device to hold a context for cuLink; --target compiles through
// CU_JIT_TARGET for any CC the driver knows, GPU present or not. Entries are stored under this
// driver's identity; another machine with another driver uses them as "other-driver" hits (then
// re-JITs in the background for its own driver, docs/cache.md).
#pragma once

#include "fatpack/error.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fatpack::detail::cache {

// The per-user cache directory the runtime uses by default: $FATPACK_CACHE_PATH, else
// $XDG_CACHE_HOME/fatpack, else $HOME/.cache/fatpack (the directory need not exist yet).
std::string default_cache_dir();

// "512M", "2G", "1048576" (FATPACK_CACHE_MAXSIZE's syntax, docs/cache.md) -> bytes; false if malformed.
bool parse_max_size(const std::string& text, std::uint64_t& out);

// One entry file (docs/cache.md §3).
struct entry_info {
  std::string file;               // absolute path of the entry file
  std::string code_key;           // 32 hex digits (XXH3-128 of code_text)
  std::string code_text;          // "v1|culink|ptx=<xxh3>:<size>|src=compute_80@9.0|cc=90|opt=-O3"
  // What compiled it: "ptx-jit" (a PTX entry's JIT, code_text as above), "nvrtc-source" or
  // "nvrtc-ptx-jit" (fatpack::compile, whose key texts fill those fields with other things), or
  // "unknown" (a text this version does not write).
  std::string kind;
  std::string code_name;          // how `fatpack cache list` names the code: code_text, or for
                                  // fatpack::compile's keys "NVRTC source key <32 hex>, sm_90"
  std::string driver_id;          // 16 hex digits (XXH3-64 of driver_text)
  std::string driver_text;        // "13000|580.159.04" (cuDriverGetVersion | driver build string)
  std::uint32_t sm = 0;           // the cubin's SM from its ELF e_flags (90)
  bool arch_specific = false;     // sm_90a
  std::string target;             // the cubin's target as nvcc spells it: "sm_90", "sm_90a", "sm_100f"
  std::uint64_t cubin_bytes = 0;  // uncompressed
  std::uint64_t disk_bytes = 0;   // size of the file
  std::int64_t created_unix_s = 0;
  std::int64_t last_use_unix_s = 0;  // from the index; 0 when the index does not know the entry
};

// A problem verify() found. Such an entry is never served (every read validates it anyway).
struct entry_problem {
  std::string file;
  std::string problem;  // "payload checksum mismatch", "stray temporary file", "index damaged: ..."
  bool removed = false;  // verify(true) removed it
  bool directory = false;  // a directory (a fan-out one the rules refuse): reported, never removed
};

struct disk_stats {
  std::string path;               // the cache directory
  bool writable = false;          // opened read-write
  std::uint64_t entries = 0;      // entry files
  std::uint64_t bytes = 0;        // their total size on disk
  std::uint64_t cubin_bytes = 0;  // their total uncompressed size
  std::uint64_t max_bytes = 0;    // FATPACK_CACHE_MAXSIZE (or the default)
  std::uint64_t temp_files = 0;   // unfinished writes (a writer alive, or stray)
  bool index_ok = false;          // the index file is present and its header valid
  std::uint64_t index_bytes = 0;  // size of the index file
  std::uint64_t index_entries = 0;
  std::uint64_t index_total_bytes = 0;  // what the index believes (should equal `bytes`)
  // The whole directory as `du` sees it: every file and directory under `path` (entries, index,
  // lock files, temp files; symlinks are not followed), apparent sizes and allocated blocks.
  std::uint64_t dir_items = 0;
  std::uint64_t dir_apparent_bytes = 0;   // du --apparent-size --bytes
  std::uint64_t dir_allocated_bytes = 0;  // du --bytes of allocated blocks (st_blocks * 512)
};

struct prune_result {
  std::uint64_t removed = 0;
  std::uint64_t bytes_freed = 0;
  std::uint64_t bytes_left = 0;
};

// A fleet cache for push, pull and warm --push: fatpack::remote_cache_options's fields (docs/cache.md
// §12), as plain data for the CLI.
struct remote_settings {
  std::string url;                 // https://host/base, redis://host:port/db
  bool read_write = false;
  std::string key_file;            // signing key
  bool trust_all_writers = false;  // write without a key
  unsigned connect_timeout_ms = 0, timeout_ms = 0;  // 0: the defaults
  std::string credentials_file, ca_file;
};

struct warm_options {
  // Targets as major*10+minor (86, 90, 100, 120). Empty: the CC of every GPU present.
  std::vector<std::uint32_t> targets;
  // A fleet cache (docs/cache.md §12), url "" for none. `fatpack warm --push URL` (read_write):
  // entries the remote has are pulled instead of compiled, and every entry warm compiled or found
  // is uploaded. `fatpack cache pull` (compile = false): entries are only looked up, here then in
  // the remote, and copied into this cache; nothing is compiled.
  remote_settings remote;
  bool compile = true;
  // Called after each item; `done` of `total`.
  std::function<void(const struct warm_item&, std::size_t done, std::size_t total)> progress;
};

struct warm_item {
  std::string package;            // package name
  std::string module;
  std::uint32_t target = 0;       // the CC compiled for
  std::string entry;              // the PTX entry used: "compute_80 (PTX ISA 9.0)"; empty if none
  // pulled: copied from the remote (warm --push, cache pull); not_found: cache pull found it
  // neither here nor in the remote.
  enum class outcome { compiled, already_cached, has_sass, no_ptx, failed, pulled, not_found } result = outcome::failed;
  std::string message;            // why (selector's reason, or the JIT error)
  double jit_ms = 0;
  // Kernel-granular JIT: the pieces the module is compiled in, each its own cache entry, as the
  // runtime loads it (docs/runtime.md); 0 when it is compiled whole.
  std::size_t pieces = 0;
};
const char* outcome_name(warm_item::outcome o) noexcept;  // "compiled", "already_cached", ...

class admin {
 public:
  // Opens (read_only=false: creates, mode 0700) the cache at `dir`. Refuses a directory owned by
  // another user or writable by group/others, as the runtime does.
  static result<std::unique_ptr<admin>> open(const std::string& dir, bool read_only);
  virtual ~admin() = default;

  virtual const std::string& path() const = 0;
  virtual disk_stats stats() = 0;
  // Every entry (headers read and checked, payloads not), most recently used first. An entry file
  // whose head cannot be read or is refused is not listed; `unreadable`, when given, gets each with
  // why (as verify() would say).
  virtual std::vector<entry_info> list(std::vector<entry_problem>* unreadable = nullptr) = 0;
  // Reads and validates every entry completely (checksums, decompression, cubin SM) and the index;
  // remove_bad (read-write only): deletes bad entries and stray temp files, rebuilds a bad index.
  virtual std::vector<entry_problem> verify(bool remove_bad) = 0;
  // Evicts least recently used entries until at most max_bytes remain (read-write only).
  virtual prune_result prune(std::uint64_t max_bytes) = 0;
  // Removes every entry and temp file and resets the index (read-write only).
  virtual status clear() = 0;
};

// The FATPACK_CACHE_* values of the environment that are not understood (FATPACK_CACHE_CODEC=zstd,
// FATPACK_CACHE_MAXSIZE=lots, ...), one line each saying what is used instead: the runtime warns
// about them once; the CLI commands that write entries print them.
std::vector<std::string> environment_warnings();

// "sm_86" / "sm_90a" / "86" / "9.0" -> 86 / 90 / 86 / 90 (a/f letters: the variant follows the PTX
// entry, as at run time). An error names the text.
result<std::uint32_t> parse_warm_target(const std::string& text);

// For each package file, each module and each target: selects what a GPU of that CC would load
// (core::select, this driver's PTX ISA limit). SASS -> has_sass; PTX -> compiled with CU_JIT_TARGET
// (or already_cached when an exact entry is there) and stored into `cache`. Errors of single items
// are items; the result is an error only when nothing can be done (no driver, unreadable package).
result<std::vector<warm_item>> warm_packages(admin& cache, const std::vector<std::string>& package_files,
                                             const warm_options& options);

// `fatpack cache push`: every valid entry of `cache` to the remote (`remote.url`, read-write
// settings: a key, or trust_all_writers), publish-if-absent, signed with the key when there is one,
// several at once. Entries that fail validation are not sent (they are counted as invalid).
struct push_result {
  std::uint64_t entries = 0;   // valid entries found
  std::uint64_t uploaded = 0;  // written to the remote
  std::uint64_t present = 0;   // the remote had them already
  std::uint64_t invalid = 0;   // not sent: the entry failed validation
  std::uint64_t failed = 0;    // the remote refused or did not answer
  std::vector<std::string> problems;  // one line per failure or invalid entry (bounded)
};
result<push_result> push_entries(admin& cache, const remote_settings& remote);
// A remote URL fit for output: user info, password and query replaced by "***".
std::string redact_remote_url(const std::string& url);

}  // namespace fatpack::detail::cache
