// fatpack cache stats|list|verify|prune|clear: operate the runtime's JIT cache (docs/cache.md).
// Everything goes through the runtime's own cache code (fatpack/admin/cache_admin.hpp), so the
// tool reads, validates and evicts exactly as a program does.
#include "json_out.hpp"
#include "tool.hpp"

#include "fatpack/admin/cache_admin.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>

namespace fatpack::tool {
namespace {

namespace fc = fatpack::detail::cache;

int failed(const fatpack::error& e) {
  print_error(runtime_error_text(e));
  return exit_failure;
}

std::string when(std::int64_t unix_s) {
  if (unix_s <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_s);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

double per_cubin_byte(std::uint64_t bytes, std::uint64_t cubin_bytes) {
  return cubin_bytes ? double(bytes) / double(cubin_bytes) : 0.0;
}

nlohmann::json stats_json(const fc::disk_stats& s) {
  return {{"path", s.path},
          {"writable", s.writable},
          {"entries", s.entries},
          {"bytes", s.bytes},
          {"cubin_bytes", s.cubin_bytes},
          {"max_bytes", s.max_bytes},
          {"temp_files", s.temp_files},
          {"index", {{"ok", s.index_ok}, {"bytes", s.index_bytes}, {"entries", s.index_entries},
                     {"total_bytes", s.index_total_bytes}}},
          // The whole directory (index, lock files and directories included), as du counts it.
          {"directory", {{"items", s.dir_items}, {"apparent_bytes", s.dir_apparent_bytes},
                         {"allocated_bytes", s.dir_allocated_bytes},
                         {"apparent_per_cubin_byte", per_cubin_byte(s.dir_apparent_bytes, s.cubin_bytes)},
                         {"allocated_per_cubin_byte", per_cubin_byte(s.dir_allocated_bytes, s.cubin_bytes)}}}};
}

nlohmann::json entry_json(const fc::entry_info& e) {
  return {{"file", e.file},
          {"code_key", e.code_key},
          {"code", e.code_text},
          {"kind", e.kind},
          {"driver_id", e.driver_id},
          {"driver", e.driver_text},
          {"sm", e.sm},
          {"arch_specific", e.arch_specific},
          {"target", e.target},
          {"cubin_bytes", e.cubin_bytes},
          {"disk_bytes", e.disk_bytes},
          {"created_unix_s", e.created_unix_s},
          {"last_use_unix_s", e.last_use_unix_s}};
}

void print_json(const nlohmann::json& body) {
  nlohmann::json doc = {{"schema_version", 1}};
  doc.update(body);
  print_json_document(doc);
}

struct cache_args {
  std::string path;
  bool json = false;
  bool repair = false;
  std::string max_size;
  fatpack::detail::cache::remote_settings remote;  // push, pull
  std::vector<std::string> targets, packages;  // pull
};

// Opens the cache the command works on: --path, else the per-user default the runtime uses. A path
// that is not a directory is an error (before, a file read as an empty cache). A command that only
// removes (`prune`, `clear`, `verify --repair`: `existing`) needs a cache at a --path given: before,
// a mistyped path got a new, empty cache made at it and "removed 0 entries".
fatpack::result<std::unique_ptr<fc::admin>> open_cache(const cache_args& a, bool read_only, bool existing = false) {
  const std::string dir = cache_dir_argument(a.path);
  std::error_code ec;
  const auto st = std::filesystem::status(dir, ec);
  if (std::filesystem::exists(st) && !std::filesystem::is_directory(st))
    return fatpack::error{fatpack::errc::invalid_argument, 0, dir + " is not a directory", {}};
  // A command that reads (stats, list, verify, push) at a --path that does not exist: before, a
  // mistyped path showed an empty "(read-only)" cache and succeeded.
  if (read_only && !a.path.empty() && !std::filesystem::exists(st))
    return fatpack::error{fatpack::errc::invalid_argument, 0,
                          "no fatpack cache at " + dir + " (" +
                              (ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "no such directory") + ")",
                          {}};
  // Only of a --path given: the default cache of a user who has run nothing yet is an empty one (a
  // script that clears it on a fresh machine must not fail).
  if (existing && !a.path.empty() && !std::filesystem::is_directory(std::filesystem::symlink_status(dir + "/v1", ec)))
    return fatpack::error{fatpack::errc::invalid_argument, 0,
                          "no fatpack cache at " + dir + " (it has no v1/ directory): nothing to change", {}};
  return fc::admin::open(dir, read_only);
}

int run_stats(const cache_args& a) {
  auto c = open_cache(a, true);
  if (!c) return failed(c.error());
  const fc::disk_stats s = (*c)->stats();
  if (a.json) {
    print_json({{"stats", stats_json(s)}});
    return exit_ok;
  }
  std::printf("cache:        %s%s\n", printable(s.path).c_str(), s.writable ? "" : " (read-only)");
  std::printf("entries:      %llu, %s on disk for %s of SASS (%.2f bytes per cubin byte)\n",
              static_cast<unsigned long long>(s.entries), human_size(s.bytes).c_str(), human_size(s.cubin_bytes).c_str(),
              per_cubin_byte(s.bytes, s.cubin_bytes));
  std::printf("size limit:   %s\n", s.max_bytes ? human_size(s.max_bytes).c_str() : "none");
  std::printf("index:        %s, %s, %llu entries, %s counted\n", s.index_ok ? "ok" : "missing or damaged (rebuilt on use)",
              human_size(s.index_bytes).c_str(), static_cast<unsigned long long>(s.index_entries),
              human_size(s.index_total_bytes).c_str());
  std::printf("temp files:   %llu\n", static_cast<unsigned long long>(s.temp_files));
  std::printf("directory:    %llu files and directories, %s apparent, %s allocated (%.2f and %.2f bytes per cubin byte)\n",
              static_cast<unsigned long long>(s.dir_items), human_size(s.dir_apparent_bytes).c_str(),
              human_size(s.dir_allocated_bytes).c_str(), per_cubin_byte(s.dir_apparent_bytes, s.cubin_bytes),
              per_cubin_byte(s.dir_allocated_bytes, s.cubin_bytes));
  return exit_ok;
}

int run_list(const cache_args& a) {
  auto c = open_cache(a, true);
  if (!c) return failed(c.error());
  std::vector<fc::entry_problem> unreadable;
  const auto entries = (*c)->list(&unreadable);
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array(), bad = nlohmann::json::array();
    for (const auto& e : entries) arr.push_back(entry_json(e));
    for (const auto& p : unreadable) bad.push_back({{"file", p.file}, {"problem", p.problem}});
    print_json({{"path", (*c)->path()}, {"entries", arr}, {"unreadable", bad}});
    return exit_ok;
  }
  std::printf("%-32s %-8s %10s %10s  %-19s  %-16s %s\n", "code key", "sm", "cubin", "on disk", "last use", "driver",
              "code");
  for (const auto& e : entries) {
    std::printf("%-32s %-8s %10llu %10llu  %-19s  %-16s %s\n", e.code_key.c_str(), e.target.c_str(),
                static_cast<unsigned long long>(e.cubin_bytes), static_cast<unsigned long long>(e.disk_bytes),
                when(e.last_use_unix_s).c_str(), printable(e.driver_text).c_str(), printable(e.code_name).c_str());
  }
  std::printf("%s in %s\n", count_of(entries.size(), "entry", "entries").c_str(), printable((*c)->path()).c_str());
  // Not listed, but not hidden: an entry file the runtime would refuse (never served), a file that is
  // no entry, an item of objects/ that is not a fan-out directory. `verify --repair` removes each
  // of them but a directory, and says so.
  for (const auto& p : unreadable)
    print_warning(printable(p.file + ": " + p.problem) +
                  (p.directory ? " (not listed)" : " (not listed; fatpack cache verify --repair removes it)"));
  return exit_ok;
}

int run_verify(const cache_args& a) {
  auto c = open_cache(a, !a.repair, a.repair);
  if (!c) return failed(c.error());
  const auto problems = (*c)->verify(a.repair);
  const auto checked = (*c)->stats().entries;
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& p : problems) arr.push_back({{"file", p.file}, {"problem", p.problem}, {"removed", p.removed}});
    print_json({{"path", (*c)->path()}, {"ok", problems.empty()}, {"problems", arr}});
  } else {
    for (const auto& p : problems)
      // The index is rebuilt, not removed.
      print_error(printable(p.file + ": " + p.problem) +
                  (!p.removed ? "" : p.file.size() >= 9 && p.file.compare(p.file.size() - 9, 9, "/index.v1") == 0
                                         ? " (rebuilt)"
                                         : " (removed)"));
    if (problems.empty())
      std::printf("%s: ok (%s)\n", printable((*c)->path()).c_str(), count_of(checked, "entry", "entries").c_str());
  }
  // Repaired problems leave a sound cache; unrepaired ones are a failure.
  for (const auto& p : problems)
    if (!p.removed) return exit_failure;
  return exit_ok;
}

int run_prune(const cache_args& a) {
  auto c = open_cache(a, false, true);
  if (!c) return failed(c.error());
  std::uint64_t max_bytes = (*c)->stats().max_bytes;
  if (!a.max_size.empty() && !fc::parse_max_size(a.max_size, max_bytes))
    throw usage_error{"--max-size: '" + a.max_size + "' is not a size (bytes, or with a K/M/G/T suffix; at most 2^64 - 1 bytes)"};
  const fc::prune_result r = (*c)->prune(max_bytes);
  if (a.json) {
    print_json({{"path", (*c)->path()}, {"max_bytes", max_bytes}, {"removed", r.removed},
                {"bytes_freed", r.bytes_freed}, {"bytes_left", r.bytes_left}});
    return exit_ok;
  }
  std::printf("%s: removed %s (%s), %s left (limit %s)\n", printable((*c)->path()).c_str(),
              count_of(r.removed, "entry", "entries").c_str(), human_size(r.bytes_freed).c_str(),
              human_size(r.bytes_left).c_str(), human_size(max_bytes).c_str());
  return exit_ok;
}

int run_clear(const cache_args& a) {
  auto c = open_cache(a, false, true);
  if (!c) return failed(c.error());
  const auto before = (*c)->stats();
  if (auto s = (*c)->clear(); !s) return failed(s.error());
  if (a.json)
    print_json({{"path", (*c)->path()}, {"removed", before.entries}, {"bytes_freed", before.bytes}});
  else
    std::printf("%s: removed %s (%s)\n", printable((*c)->path()).c_str(), count_of(before.entries, "entry", "entries").c_str(),
                human_size(before.bytes).c_str());
  return exit_ok;
}

int run_push(const cache_args& a) {
  auto c = open_cache(a, true);
  if (!c) return failed(c.error());
  auto r = fc::push_entries(**c, a.remote);
  if (!r) return failed(r.error());
  const std::string where = fc::redact_remote_url(a.remote.url);
  if (a.json) {
    print_json({{"path", (*c)->path()}, {"remote", where}, {"entries", r->entries}, {"uploaded", r->uploaded},
                {"present", r->present}, {"invalid", r->invalid}, {"failed", r->failed}, {"problems", r->problems}});
  } else {
    for (const auto& p : r->problems) print_error(p);
    std::printf("%s -> %s: %s, %llu uploaded, %llu already there, %llu invalid (not sent), %llu failed\n",
                printable((*c)->path()).c_str(), where.c_str(), count_of(r->entries, "valid entry", "valid entries").c_str(),
                static_cast<unsigned long long>(r->uploaded), static_cast<unsigned long long>(r->present),
                static_cast<unsigned long long>(r->invalid), static_cast<unsigned long long>(r->failed));
  }
  return r->failed ? exit_failure : exit_ok;
}

}  // namespace

std::string cache_dir_argument(const std::string& path) {
  if (path.empty()) return fc::default_cache_dir();
  std::error_code ec;
  const auto abs = std::filesystem::absolute(path, ec);  // the runtime wants an absolute path
  return ec ? path : abs.lexically_normal().string();
}

std::string runtime_error_text(const fatpack::error& e) {
  return e.log.empty() ? e.message : e.message + "\n" + e.log;
}

void add_cache_path_option(CLI::App& cmd, std::string& path) {
  cmd.add_option("--path", path,
                 "Cache directory (default: the per-user cache: $FATPACK_CACHE_PATH, $XDG_CACHE_HOME/fatpack or "
                 "~/.cache/fatpack)")
      ->check(not_empty("give a directory, or leave --path out for the per-user cache"));
}

command_runner add_cache_command(CLI::App& app) {
  auto args = std::make_shared<cache_args>();
  auto which = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("cache", "Inspect and maintain the runtime's JIT cache (docs/cache.md)");
  cmd->require_subcommand(1);
  struct sub {
    const char* name;
    const char* help;
  };
  const sub subs[] = {
      {"stats", "Entries, bytes on disk, size limit, index state, the whole directory (apparent and allocated bytes per cubin byte)"},
      {"list", "Every entry: code key, SM, sizes, last use, driver (most recently used first)"},
      {"verify", "Read and check every entry and the index; exit 1 if something is wrong (--repair removes it)"},
      {"prune", "Evict least recently used entries down to the size limit (or --max-size)"},
      {"clear", "Remove every entry"},
      {"push", "Publish every valid entry to a fleet cache (--remote URL; signed with --key; docs/cache.md §12)"},
      {"pull", "Copy from a fleet cache (--remote URL) the entries these packages need on --target GPUs (or the "
               "GPUs present) with this driver; compiles nothing"},
  };
  for (const auto& s : subs) {
    CLI::App* c = cmd->add_subcommand(s.name, s.help);
    add_cache_path_option(*c, args->path);
    if (std::string(s.name) != "pull")  // pull prints warm's lines; it has no JSON form
      c->add_flag("--json", args->json, "One JSON document on stdout (schema_version 1)");
    if (std::string(s.name) == "verify")
      c->add_flag("--repair", args->repair, "Remove bad entries and stray temporary files, rebuild a damaged index");
    if (std::string(s.name) == "prune")
      c->add_option("--max-size", args->max_size, "Keep at most this much (bytes, or 512M, 2G; default: the limit)");
    if (std::string(s.name) == "push" || std::string(s.name) == "pull") {
      c->add_option("--remote", args->remote.url, "The fleet cache: https://host/base or redis://host:port/db")->required();
      add_remote_options(*c, args->remote);
    }
    if (std::string(s.name) == "pull") {
      c->add_option("--target", args->targets, "GPUs to pull for: sm_86,sm_90 (default: the GPUs present)")
          ->allow_extra_args(false)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      c->add_option("packages", args->packages, "Packages (.fpk) whose PTX modules' entries to pull")->required();
    }
    c->callback([which, name = std::string(s.name)] { *which = name; });
  }
  return [args, which]() {
    if (*which == "stats") return run_stats(*args);
    if (*which == "list") return run_list(*args);
    if (*which == "verify") return run_verify(*args);
    if (*which == "prune") return run_prune(*args);
    if (*which == "push") return run_push(*args);
    if (*which == "pull") return run_cache_pull(args->path, args->targets, args->packages, args->remote);
    return run_clear(*args);
  };
}

}  // namespace fatpack::tool
