// fatpack build: drive nvcc once per (source, target) in parallel, then pack the results.
// One job per target (not one nvcc call with many -gencode) so the targets compile on separate
// cores; nvcc itself compiles -gencode targets one after another.
#include "arch_list.hpp"
#include "cleanup.hpp"
#include "depfile.hpp"
#include "file_io.hpp"
#include "nvcc_failures.hpp"
#include "pack_common.hpp"
#include "process.hpp"
#include "tool.hpp"

#include "fatpack/core/input.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace fatpack::tool {
namespace {

struct job {
  std::string source;
  core::target target;
  std::string output;
  process_result result;
  std::vector<std::string> argv;
};

// Runs `jobs` on `threads` threads (each job's nvcc in `dir`, where its temporary files go too), with
// a progress line on a terminal; reports the failures (print_nvcc_failures). False if any failed.
bool run_jobs(std::vector<job>& jobs, unsigned threads, bool verbose, const std::string& dir, const char* what) {
  if (jobs.empty()) return true;
  const unsigned n = std::min<unsigned>(std::max(1u, threads), unsigned(jobs.size()));
  std::atomic<std::size_t> next{0}, done{0};
  std::mutex out_mutex;
  const bool progress = stderr_is_terminal() && !verbose;
  auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      if (verbose) {
        std::lock_guard<std::mutex> lock(out_mutex);
        std::cerr << join_command(jobs[i].argv) << "\n";
      }
      jobs[i].result = run_process(jobs[i].argv, dir);
      const std::size_t d = ++done;
      if (progress) {
        std::lock_guard<std::mutex> lock(out_mutex);
        const auto now = std::chrono::steady_clock::now();
        if (now - last > std::chrono::milliseconds(200) || d == jobs.size()) {  // at most 5 updates/s
          last = now;
          std::cerr << "\r[" << d << "/" << jobs.size() << "] " << what << " " << jobs[i].source << " "
                    << jobs[i].target.str() << "          " << std::flush;
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (progress) std::cerr << "\r" << std::string(70, ' ') << "\r" << std::flush;

  std::vector<nvcc_failure> failures;
  for (const auto& j : jobs) {
    if (j.result.exit_code == 0) continue;
    failures.push_back({j.source, j.target.str(),
                        j.result.start_error.empty() ? "exit " + std::to_string(j.result.exit_code) : j.result.start_error,
                        join_command(j.argv), j.result.output});
  }
  if (!failures.empty()) print_nvcc_failures(failures);
  return failures.empty();
}

// Replaces the device-linked cubin of `link` (a SASS target) with nvJitLink's -lto link of every
// source's LTO-IR for that target (lto jobs among `jobs`). False only on an error.
bool link_sass_with_nvjitlink(job& link, const std::vector<job>& jobs, const std::string& ptxas_options, bool verbose) {
  std::vector<std::string> parts;
  for (const auto& j : jobs)
    if (j.target.kind == core::entry_kind::ltoir && j.target.arch == link.target.arch &&
        j.target.variant == link.target.variant)
      parts.push_back(j.output);
  std::string why;
  const lto_link_outcome r = link_lto_files(parts, link.target, ptxas_options, link.output, link.source, verbose, why);
  if (r == lto_link_outcome::unavailable)
    print_warning(link.source + ": " + link.target.str() + " SASS without link-time optimisation (nvcc -dlink): " + why);
  return r != lto_link_outcome::failed;
}

}  // namespace

command_runner add_build_command(CLI::App& app) {
  struct options {
    std::string output, name, module, nvcc = "nvcc", depfile;
    std::vector<std::string> arch;  // each --arch; joined, they are one list
    unsigned jobs = 0;
    codec_options codec;
    std::vector<std::string> sources;
    bool verbose = false;
  };
  auto o = std::make_shared<options>();
  if (const char* env = std::getenv("NVCC"); env && *env) o->nvcc = env;
  CLI::App* cmd = app.add_subcommand(
      "build", "Compile .cu sources with nvcc for an architecture list (one job per target, in parallel) and pack "
               "them. Arguments after '--' go to nvcc; those the JIT needs on a future GPU (-maxrregcount, -lineinfo, -G, "
               "-Xptxas -O<n>) are also recorded on the PTX entries. With -rdc=true (or -dc) there, the sources are "
               "compiled separately and linked into one module: SASS through nvcc -dlink per target, PTX as a link "
               "group the runtime JIT-links. With -dlto as well, each PTX target also gets every source's LTO-IR as a group "
               "that the runtime links with nvJitLink (link-time optimisation) where it knows the GPU, and the SASS is "
               "nvJitLink's -lto link of the LTO-IR (the nvcc -dlink one, with a warning, without nvJitLink).");
  cmd->add_option("-o,--output", o->output, "Output package (.fpk)")->required();
  cmd->add_option("--name", o->name, "Package name (default: the output file name up to its first '.')")
      ->check(not_empty("give a name, or leave --name out for the output file's"));
  cmd->add_option("--arch", o->arch,
                  "Targets in CMake CUDA_ARCHITECTURES syntax: 75-real,90-real,120-virtual; a bare 90 means "
                  "real + virtual; all, all-major (repeatable: --arch 80-real --arch 90-real is --arch 80-real,90-real)")
      ->required()
      ->allow_extra_args(false)  // one list per --arch: the sources after it are sources, not more architectures
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--depfile", o->depfile,
                  "Also write FILE: a Make-syntax dependency file (OUTPUT: each source and every header nvcc read, for "
                  "every target), for Make, Ninja and CMake's add_custom_command(DEPFILE)")
      ->type_name("FILE");
  cmd->add_option("-j,--jobs", o->jobs, "Parallel nvcc jobs (default: number of cores)");
  cmd->add_option("--nvcc", o->nvcc, "nvcc to run (default: $NVCC or nvcc on PATH)");
  cmd->add_option("--module", o->module,
                  "With -rdc=true after '--': the name of the one module all sources link into (default: the "
                  "package name)")
      ->check(not_empty("give a name, or leave --module out for the package name"));
  o->codec.add_to(*cmd, true);
  cmd->add_flag("-v,--verbose", o->verbose, "Print each nvcc command and a summary line");
  cmd->add_option("sources", o->sources, "CUDA sources; each becomes one module named after the file")->required();
  cmd->footer(cmd->get_footer() +
              "\nTemporary files: $TMPDIR/fatpack-build.<pid>.XXXXXX ($TMPDIR unset or empty: /tmp), removed however the "
              "build ends: on SIGINT/SIGTERM/SIGHUP/SIGPIPE nvcc is stopped first; after a SIGKILL the next build removes "
              "it (docs/cli.md).");
  return [o]() {
    require_output_not_input(o->output, o->sources);
    auto codes = nvcc_gpu_codes(o->nvcc);
    if (!codes) {
      print_error(codes.error().message);
      return exit_failure;
    }
    std::string arch_list;
    for (const auto& a : o->arch) arch_list += (arch_list.empty() ? "" : ",") + a;
    auto targets = parse_arch_list(arch_list, *codes);
    if (!targets) throw usage_error{"--arch: " + targets.error().message};
    for (const auto& s : o->sources) {
      if (::access(s.c_str(), R_OK) != 0) {
        print_error(s + ": cannot read the source file");
        return exit_failure;
      }
    }
    // The options the JIT needs for the PTX entries on a GPU newer than the build (jit_options.hpp).
    const std::string jit_options = jit_options_from_passthrough();
    const int toolkit = nvcc_toolkit_version(o->nvcc);
    // Removed however the build ends (cleanup.hpp): returning, a signal, or (SIGKILL) by the next build.
    temp_dir tmp("fatpack-build");
    if (!tmp.ok()) {
      print_error(tmp.error());
      return exit_failure;
    }
    // -rdc=true (or -dc) among the nvcc arguments: separate compilation, one module of all sources.
    std::vector<std::string> nvcc_args;
    bool rdc = false, lto = false;
    const auto& pass = passthrough_args();
    for (std::size_t i = 0; i < pass.size(); ++i) {
      const std::string& a = pass[i];
      if (a == "-rdc=true" || a == "--relocatable-device-code=true" || a == "-dc" || a == "--device-c") {
        rdc = true;
      } else if ((a == "-rdc" || a == "--relocatable-device-code") && i + 1 < pass.size() && pass[i + 1] == "true") {
        rdc = true;
        ++i;
      } else if (a == "-rdc=false" || a == "--relocatable-device-code=false") {
        rdc = false;
      } else if (a == "-dlto" || a == "--dlink-time-opt") {
        lto = true;
      } else {
        nvcc_args.push_back(a);
      }
    }
    if (lto && !rdc)
      throw usage_error{"-dlto after '--' needs -rdc=true (or -dc) too: LTO-IR is packed for separate compilation"};
    if (!rdc && !o->module.empty()) throw usage_error{"--module needs -rdc=true after '--' (without it each source is a module)"};
    const std::string package_name = o->name.empty() ? default_package_name(o->output) : o->name;
    const std::string rdc_module = o->module.empty() ? package_name : o->module;

    const unsigned threads = o->jobs ? o->jobs : std::max(1u, std::thread::hardware_concurrency());
    // Phase 1: one nvcc per (source, target). With -rdc, relocatable cubins and PTX; phase 2 then
    // device-links each target's cubins into one complete cubin (nvcc -dlink -cubin).
    std::vector<job> jobs;
    for (const auto& src : o->sources) {
      for (const auto& t : *targets) {
        job j;
        j.source = src;
        j.target = t;
        const bool ptx = t.kind == core::entry_kind::ptx;
        j.output = tmp.path() + "/" + std::to_string(jobs.size()) + (ptx ? ".ptx" : ".cubin");
        j.argv = {o->nvcc, ptx ? "-ptx" : "-cubin", "-arch=" + t.str()};
        if (rdc) j.argv.push_back("-rdc=true");
        j.argv.insert(j.argv.end(), {"-o", j.output, src});
        if (!o->depfile.empty()) j.argv.insert(j.argv.end(), {"-MD", "-MF", j.output + ".d"});
        for (const auto& a : nvcc_args) j.argv.push_back(a);
        jobs.push_back(std::move(j));
      }
    }
    // With -dlto: each source's LTO-IR (nvcc -ltoir -dlto) for every target's arch too (once per
    // arch): for a PTX target, packed as lto_XY beside compute_XY, which the runtime links with
    // nvJitLink (docs/selection.md); for a SASS target, linked here by nvJitLink into the SASS entry
    // (below). nvcc -dlink -dlto is not used: it needs nvlink's LTO library, which fails where that is
    // absent ("elfLink linker library load error").
    std::vector<job> lto_jobs;
    if (lto) {
      for (const auto& j : jobs) {
        const core::target lt{core::entry_kind::ltoir, j.target.arch, j.target.variant};
        bool have = false;
        for (const auto& l : lto_jobs) have = have || (l.source == j.source && l.target == lt);
        if (have) continue;
        job l;
        l.source = j.source;
        l.target = lt;
        l.output = tmp.path() + "/" + std::to_string(jobs.size() + lto_jobs.size()) + ".ltoir";
        l.argv = {o->nvcc, "-ltoir", "-dlto", "-rdc=true", "-arch=" + core::sm_name(j.target.arch, j.target.variant),
                  "-o", l.output, j.source};
        for (const auto& a : nvcc_args) l.argv.push_back(a);
        lto_jobs.push_back(std::move(l));
      }
    }
    jobs.insert(jobs.end(), lto_jobs.begin(), lto_jobs.end());
    if (!run_jobs(jobs, threads, o->verbose, tmp.path(), "nvcc")) return exit_failure;

    std::vector<job> links;
    if (rdc) {
      for (const auto& t : *targets) {
        if (t.kind != core::entry_kind::sass) continue;
        job l;
        l.source = "device link of module '" + rdc_module + "'";
        l.target = t;
        l.output = tmp.path() + "/link." + t.str() + ".cubin";
        l.argv = {o->nvcc, "-dlink", "-cubin", "-arch=" + t.str(), "-o", l.output};
        for (const auto& j : jobs)
          if (j.target == t) l.argv.push_back(j.output);
        links.push_back(std::move(l));
      }
      if (!run_jobs(links, threads, o->verbose, tmp.path(), "nvcc -dlink")) return exit_failure;
      // -dlto: each SASS target's cubin is nvJitLink's link-time optimised link of the sources'
      // LTO-IR, replacing the device link; where nvJitLink cannot be loaded or fails, the device link
      // stays, with a warning (the package is still right, only not link-time optimised).
      if (lto)
        for (auto& l : links)
          if (!link_sass_with_nvjitlink(l, jobs, jit_options, o->verbose)) return exit_failure;
    }

    std::vector<core::entry_input> entries;
    // One source's LTO-IR as an entry, its kernels from the same source's PTX for the same arch.
    auto ltoir_of = [&](std::vector<std::uint8_t> bytes, const job& j,
                        const std::string& module) -> core::result<std::vector<core::entry_input>> {
      const core::target ptx_target{core::entry_kind::ptx, j.target.arch, j.target.variant};
      for (const auto& p : jobs) {
        if (p.source != j.source || !(p.target == ptx_target)) continue;
        auto e = ltoir_entry(std::move(bytes), j.target, p.output, module, j.source + " (" + j.target.str() + ")");
        if (!e) return e.error();
        return std::vector<core::entry_input>{std::move(*e)};
      }
      return fatpack::error{fatpack::errc::invalid_argument, 0, j.source + ": no PTX job for " + j.target.str(), {}};
    };
    auto import = [&](const job& j, const std::string& module) {
      auto bytes = read_file(j.output);
      if (!bytes) {
        print_error(bytes.error().message);
        return false;
      }
      auto imported = j.target.kind == core::entry_kind::ltoir
                          ? ltoir_of(std::move(*bytes), j, module)
                          : core::import_input(core::byte_span(*bytes), j.source + " (" + j.target.str() + ")", module);
      if (!imported) {
        print_error(imported.error().message);
        return false;
      }
      for (auto& e : *imported) {
        e.toolkit_version = std::uint32_t(toolkit);
        // nvcc records an/f target only where it can; the requested target is authoritative.
        e.target.variant = j.target.variant;
        if (e.target.kind != core::entry_kind::sass) e.options = jit_options;
        entries.push_back(std::move(e));
      }
      return true;
    };
    if (!rdc) {
      for (const auto& j : jobs)
        if (!import(j, module_name_of(j.source))) return exit_failure;
    } else {
      // Targets in --arch order: the linked cubin, or every source's relocatable PTX as one link group.
      for (const auto& t : *targets) {
        for (const auto& l : links)
          if (l.target == t && !import(l, rdc_module)) return exit_failure;
        for (const auto& j : jobs)
          if (j.target == t && t.kind == core::entry_kind::ptx && !import(j, rdc_module)) return exit_failure;
        // The LTO-IR group of this PTX target after its PTX group (selection ranks them, not the order).
        for (const auto& j : jobs)
          if (j.target.kind == core::entry_kind::ltoir && t.kind == core::entry_kind::ptx && j.target.arch == t.arch &&
              j.target.variant == t.variant && !import(j, rdc_module))
            return exit_failure;
      }
      form_link_groups(entries);
    }
    const int rc = write_package_file(o->output, package_name, entries, o->codec, o->verbose);
    if (rc != exit_ok || o->depfile.empty()) return rc;
    std::vector<std::string> nvcc_depfiles;
    for (const auto& j : jobs) nvcc_depfiles.push_back(j.output + ".d");
    return write_build_depfile(o->depfile, o->output, nvcc_depfiles);
  };
}

}  // namespace fatpack::tool
