// fatpack warm: JIT-compile, ahead of time, every module that a GPU would need PTX for, into a cache
// directory (for installers and container builds; docs/cache.md, docs/deployment.md). Without
// --target: for the GPUs present. With --target: for any CC the installed driver knows, GPU present
// or not (the driver's cross-target JIT), so one machine can prebuild a read-only cache for a fleet.
#include "cleanup.hpp"
#include "file_io.hpp"
#include "tool.hpp"

#include "fatpack/admin/cache_admin.hpp"
#include "fatpack/fatpack.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>

namespace fatpack::tool {
namespace {

namespace fc = fatpack::detail::cache;

struct warm_args {
  std::string path;
  std::vector<std::string> targets;  // each --target: "sm_86,sm_100"
  std::vector<std::string> packages;
  bool quiet = false;
  fatpack::detail::cache::remote_settings remote;  // --push URL (read-write); cache pull (read-only)
  bool pull = false;                     // `cache pull`: look up and copy, never compile
};

// One line per item that says what happened; the selector's or the JIT's words for the why.
void print_item(const fc::warm_item& it) {
  // Names and entry descriptions come from the package: printable, as `inspect` shows them.
  std::string what = printable(it.package + "/" + it.module) + " for " + core::sm_name(it.target);
  if (it.pieces) what += " in " + std::to_string(it.pieces) + " pieces";
  const std::string entry = printable(it.entry);
  switch (it.result) {
    case fc::warm_item::outcome::compiled:
      std::printf("compiled       %s from %s (%.0f ms)\n", what.c_str(), entry.c_str(), it.jit_ms);
      break;
    case fc::warm_item::outcome::already_cached:
      std::printf("already cached %s (%s)\n", what.c_str(), entry.c_str());
      break;
    case fc::warm_item::outcome::has_sass:
      std::printf("has SASS       %s: %s\n", what.c_str(), it.message.c_str());
      break;
    case fc::warm_item::outcome::no_ptx:
      std::printf("nothing fits   %s: %s\n", what.c_str(), it.message.c_str());
      break;
    case fc::warm_item::outcome::failed:
      std::printf("FAILED         %s: %s\n", what.c_str(), it.message.c_str());
      break;
    case fc::warm_item::outcome::pulled:
      std::printf("pulled         %s (%s) from the remote\n", what.c_str(), entry.c_str());
      break;
    case fc::warm_item::outcome::not_found:
      std::printf("not found      %s (%s): %s\n", what.c_str(), entry.c_str(), it.message.c_str());
      break;
  }
  std::fflush(stdout);
}

// A one-line progress bar on stderr, only when stderr is a terminal (logs stay clean).
void draw_progress(std::size_t done, std::size_t total, const std::string& label) {
  constexpr int width = 30;
  const int filled = total ? int(width * done / total) : width;
  std::fprintf(stderr, "\r[%s%s] %zu/%zu %-40.40s", std::string(std::size_t(filled), '#').c_str(),
               std::string(std::size_t(width - filled), ' ').c_str(), done, total, label.c_str());
  if (done == total) std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
}

int run_warm(const warm_args& a) {
  fc::warm_options o;
  o.remote = a.remote;
  o.compile = !a.pull;
  if (!a.targets.empty()) {
    for (const auto& t : list_items(a.targets)) {
      auto cc = fc::parse_warm_target(t);
      if (!cc) throw usage_error{"--target: " + cc.error().message};
      o.targets.push_back(*cc);
    }
    if (o.targets.empty()) throw usage_error{"--target: no target given"};
  }
  // Entries are written as the runtime would write them (FATPACK_CACHE_CODEC, ...): a value the
  // runtime would warn about is said here too, instead of silently using the default.
  for (const auto& w : fc::environment_warnings()) print_warning(w);
  auto cache = fc::admin::open(cache_dir_argument(a.path), false);
  if (!cache) {
    print_error(runtime_error_text(cache.error()));
    return exit_failure;
  }
  const bool bar = stderr_is_terminal() && !a.quiet;
  o.progress = [&](const fc::warm_item& it, std::size_t done, std::size_t total) {
    if (bar) draw_progress(done, total, it.module + " " + core::sm_name(it.target));
  };
  // Programs and libraries that embed packages are warmed like .fpk files: their packages (found
  // as `inspect` finds them) are written to a temporary directory for the runtime's warm code.
  std::vector<std::string> files;
  std::unique_ptr<temp_dir> scratch;  // made for the first embedded package; removed as in build
  for (const auto& path : a.packages) {
    auto pf = load_package_file(path);
    if (!pf) {
      print_error(pf.error().message);
      return exit_failure;
    }
    if (!pf->embedded) {
      files.push_back(path);
      continue;
    }
    if (!scratch) {
      scratch = std::make_unique<temp_dir>("fatpack-warm");
      if (!scratch->ok()) {
        print_error(scratch->error() + " (for the packages embedded in " + path + ")");
        return exit_failure;
      }
    }
    for (std::size_t i = 0; i < pf->packages.size(); ++i) {
      const std::string out = scratch->path() + "/" + std::to_string(files.size()) + "-" +
                              safe_file_component(std::string(pf->packages[i].name())) + ".fpk";
      if (auto st = write_file_atomic(out, pf->packages[i].bytes()); !st) {
        print_error(st.error().message);
        return exit_failure;
      }
      files.push_back(out);
    }
  }
  auto items = fc::warm_packages(**cache, files, o);
  if (!items) {
    print_error(runtime_error_text(items.error()));
    return exit_failure;
  }
  std::size_t counts[7] = {};
  double jit_ms = 0;
  for (const auto& it : *items) {
    if (!a.quiet || it.result == fc::warm_item::outcome::failed) print_item(it);
    ++counts[static_cast<int>(it.result)];
    jit_ms += it.jit_ms;
  }
  using oc = fc::warm_item::outcome;
  if (a.pull) {
    std::printf("%s: %zu pulled, %zu already cached, %zu not in the remote, %zu have SASS, %zu with nothing that fits\n",
                printable((*cache)->path()).c_str(), counts[int(oc::pulled)], counts[int(oc::already_cached)],
                counts[int(oc::not_found)], counts[int(oc::has_sass)], counts[int(oc::no_ptx)]);
    return exit_ok;  // a miss is not a failure: the node compiles what the remote lacks
  }
  std::printf("%s: %zu compiled (%.0f ms of JIT), %zu already cached, %zu pulled, %zu have SASS, %zu with nothing "
              "that fits, %zu failed\n",
              printable((*cache)->path()).c_str(), counts[int(oc::compiled)], jit_ms, counts[int(oc::already_cached)],
              counts[int(oc::pulled)], counts[int(oc::has_sass)], counts[int(oc::no_ptx)], counts[int(oc::failed)]);
  if (!a.remote.url.empty()) {
    const auto st = fatpack::cache_stats();
    std::printf("pushed to %s: %llu uploaded, %llu already there, %llu failed\n", fc::redact_remote_url(a.remote.url).c_str(),
                static_cast<unsigned long long>(st.remote_uploads), static_cast<unsigned long long>(st.remote_present),
                static_cast<unsigned long long>(st.remote_faults));
  }
  return counts[int(oc::failed)] ? exit_failure : exit_ok;
}

}  // namespace

command_runner add_warm_command(CLI::App& app) {
  auto args = std::make_shared<warm_args>();
  CLI::App* cmd = app.add_subcommand(
      "warm",
      "JIT-compile every module that needs PTX on the GPUs present (or on --target GPUs) into a cache directory, "
      "ahead of time (installers, container images). Selection and key are the runtime's: the policy from "
      "FATPACK_FORCE_PTX_JIT / CUDA_FORCE_PTX_JIT / CUDA_DISABLE_PTX_JIT, Tegra rules for Tegra CCs (sm_87, sm_110), "
      "the JIT path from FATPACK_JIT_BACKEND, and entries written as FATPACK_CACHE_CODEC says (none: stored, the "
      "default; lz4: about a quarter of the bytes; docs/cache.md §3)");
  add_cache_path_option(*cmd, args->path);
  cmd->add_option("--target", args->targets,
                  "Compile for these GPUs instead of the ones present: sm_86,sm_100,sm_120, repeatable (the driver's "
                  "cross-target JIT; any CC the installed driver knows)")
      ->allow_extra_args(false)  // one list per --target: the packages after it are packages
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("-q,--quiet", args->quiet, "Print only failures and the summary line");
  cmd->add_option("--push", args->remote.url,
                  "Also publish to this fleet cache (https://host/base or redis://host:port/db): every entry warm "
                  "compiled or found, signed with --key (docs/cache.md §12); entries the remote has are pulled "
                  "instead of compiled");
  add_remote_options(*cmd, args->remote);
  cmd->add_option("packages", args->packages,
                  "Packages (.fpk), or programs and libraries that embed packages (found as `inspect` finds them)")
      ->required();
  return [args]() {
    args->remote.read_write = !args->remote.url.empty();
    return run_warm(*args);
  };
}

void add_remote_options(CLI::App& cmd, fatpack::detail::cache::remote_settings& o) {
  // The runtime's variable too: a node configured through the environment must not pull unsigned.
  cmd.add_option("--key", o.key_file,
                 "Signing key file (>= 32 bytes, mode 0600; default: $FATPACK_CACHE_REMOTE_KEY): uploads are signed "
                 "with it and entries not signed with it are refused")
      ->envname("FATPACK_CACHE_REMOTE_KEY");
  cmd.add_flag("--trust-all-writers", o.trust_all_writers,
               "Write to a remote without a key: whoever can write the store can then run code on every node");
  cmd.add_option("--credentials", o.credentials_file, "HTTP: a file with one line \"bearer TOKEN\" or \"basic USER:PASSWORD\"");
  cmd.add_option("--ca-file", o.ca_file, "HTTPS: a CA bundle instead of the system's");
  cmd.add_option("--timeout-ms", o.timeout_ms, "Per request, connect included (default 3000)");
}

int run_cache_pull(const std::string& path, const std::vector<std::string>& targets,
                   const std::vector<std::string>& packages, const fatpack::detail::cache::remote_settings& remote) {
  warm_args a;
  a.path = path;
  a.targets = targets;
  a.packages = packages;
  a.remote = remote;
  a.remote.read_write = false;
  a.pull = true;
  return run_warm(a);
}

}  // namespace fatpack::tool
