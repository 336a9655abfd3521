// Runtime tests that need a fresh process per driver configuration: the runtime loads the driver once
// per process (as a product does), so each case starts fatpack_runtime_probe with its own environment.
// Covers: no driver, no device, old drivers, a missing entry point, cuInit failure, 0 packages, the
// embedded-record path, environment policies, FATPACK_LOG=info on stderr, two-device processes, an
// unknown future GPU, and JIT counting across processes.
#include "test_support.hpp"

using namespace fatpack_test;

namespace {

using env_map = std::map<std::string, std::string>;

env_map fake(env_map extra = {}) {
  env_map e{{"FATPACK_LIBCUDA", FAKECUDA_PATH}, {"FAKECUDA_DEVICES", "90"}};
  for (auto& kv : extra) e[kv.first] = kv.second;
  return e;
}

const std::string& full_package() {
  static const std::string p = package_file(
      "proc_full", entries_of("vadd", {"vadd.sm_75.cubin", "vadd.sm_80.cubin", "vadd.sm_90.cubin",
                                      "vadd.compute_80.ptx"}));
  return p;
}

const std::string& ptx_package() {
  static const std::string p = package_file("proc_ptx", entries_of("vadd", {"vadd.compute_80.ptx"}));
  return p;
}

child_result probe(const std::vector<std::string>& args, const env_map& env) {
  std::vector<std::string> argv{PROBE_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_child(argv, env);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

}  // namespace

TEST_CASE("no driver: one error value naming the library, no crash") {
  auto r = probe({"--package", full_package(), "devices", "load", "vadd"},
                 {{"FATPACK_LIBCUDA", "/nonexistent/libcuda.so.1"}});
  CHECK(r.status == 1);
  CHECK(r.has("devices error=no_driver"));
  CHECK(r.has("load vadd error=no_driver"));
  CHECK(r.has("FATPACK_LIBCUDA=/nonexistent/libcuda.so.1"));
}

TEST_CASE("a driver library cut short: an error value naming it and the truncation, no SIGBUS in dlopen") {
  // FATPACK_LIBCUDA at a copy that ran out of disk: dlopen would map it and die at the first touch
  // past the end (before the check, the probe was killed by SIGBUS).
  std::ifstream in(FAKECUDA_PATH, std::ios::binary);
  std::string lib((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(loadable_end(lib) > 8192);
  const std::string cut = temp_dir() + "/libcuda_cut.so.1";
  write_file(cut, std::vector<std::uint8_t>(lib.begin(), lib.begin() + static_cast<long>(loadable_end(lib) / 2)));
  auto r = probe({"--package", full_package(), "devices", "load", "vadd"}, {{"FATPACK_LIBCUDA", cut}});
  CHECK(r.status == 1);
  CHECK(r.has("devices error=no_driver"));
  CHECK(r.has("FATPACK_LIBCUDA=" + cut));
  CHECK(r.has("truncated: a loadable segment ends at byte"));
}

TEST_CASE("no device: cuInit reports none") {
  auto r = probe({"--package", full_package(), "devices", "load", "vadd"}, fake({{"FAKECUDA_DEVICES", ""}}));
  CHECK(r.status == 1);
  CHECK(r.has("devices error=no_device cuda=100"));
  CHECK(r.has("CUDA_ERROR_NO_DEVICE"));
  CHECK(r.has(FAKECUDA_PATH));
}

TEST_CASE("old driver: too old a CUDA version, or no cuGetProcAddress_v2") {
  auto r = probe({"devices"}, fake({{"FAKECUDA_DRIVER_VERSION", "11080"}}));
  CHECK(r.has("devices error=driver_too_old"));
  CHECK(r.has("CUDA 11.8"));
  CHECK(r.has("12.0"));
  auto old = probe({"devices"}, {{"FATPACK_LIBCUDA", FAKECUDA_OLD_PATH}});
  CHECK(old.has("devices error=driver_too_old"));
  CHECK(old.has("CUDA 11.4"));
}

TEST_CASE("a missing driver entry point names itself") {
  auto r = probe({"devices"}, fake({{"FAKECUDA_MISSING", "cuLinkCreate"}}));
  CHECK(r.has("devices error=driver_symbol_missing"));
  CHECK(r.has("cuLinkCreate"));
}

TEST_CASE("cuInit failure is reported with the driver's error") {
  auto r = probe({"devices"}, fake({{"FAKECUDA_INIT_ERROR", "999"}}));
  CHECK(r.has("devices error=cuda cuda=999"));
  CHECK(r.has("cuInit"));
}

TEST_CASE("0 packages: a clear error that says what was checked and the likely fix") {
  auto r = probe({"load", "vadd"}, fake());
  CHECK(r.status == 1);
  CHECK(r.has("load vadd error=no_packages"));
  CHECK(r.has("0 package notes (.note.fatpack) in "));
  CHECK(r.has("0 records between __start_fatpack_registry"));
  CHECK(r.has("0 registered through fatpack_register_embedded, 0 added through the API"));
  CHECK(r.has("-Wl,-u,fatpack_pkg_<symbol>_record"));
}

TEST_CASE("embedded package: found through the fatpack_registry section") {
  auto r = run_child({PROBE_EMBEDDED_PATH, "--embed", full_package(), "load", "vadd"}, fake());
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(r.has("load vadd device=0 ok entry=2 target=sm_90 jit=0"));
  // A record whose bytes are not a package is skipped and named.
  auto bad = run_child({PROBE_EMBEDDED_PATH, "load", "vadd"}, fake());
  INFO(bad.out << bad.err);
  CHECK(bad.has("error=no_packages"));
  CHECK(bad.has("embedded package 'probe_embedded'"));
  // The count is the records found, and the advice fits: the record was linked in, so linking
  // "whole" is not the fix. Before: "0 embedded records", then the skipped one, and WHOLE_ARCHIVE.
  CHECK(bad.has("1 records between __start_fatpack_registry"));
  CHECK(bad.has("1 of 1 embedded records skipped as invalid"));
  CHECK_FALSE(bad.has("whole-archive"));
}

TEST_CASE("environment policies: FATPACK_FORCE_PTX_JIT, CUDA_FORCE_PTX_JIT, CUDA_DISABLE_PTX_JIT") {
  auto base = probe({"--package", full_package(), "load", "vadd"}, fake());
  CHECK(base.has("target=sm_90 jit=0"));
  auto f1 = probe({"--package", full_package(), "load", "vadd"}, fake({{"FATPACK_FORCE_PTX_JIT", "1"}}));
  CHECK(f1.has("target=compute_80 (PTX ISA 9.0) jit=1"));
  auto f0 = probe({"--package", full_package(), "load", "vadd"}, fake({{"FATPACK_FORCE_PTX_JIT", "0"}}));
  CHECK(f0.has("jit=0"));
  auto f2 = probe({"--package", full_package(), "load", "vadd"}, fake({{"CUDA_FORCE_PTX_JIT", "1"}}));
  CHECK(f2.has("jit=1"));
  auto d = probe({"--package", ptx_package(), "load", "vadd"}, fake({{"CUDA_DISABLE_PTX_JIT", "1"}}));
  CHECK(d.has("error=no_compatible_entry"));
  CHECK(d.has("sass_only"));
  // A policy given through the API wins over the environment.
  auto api = probe({"--package", full_package(), "--policy", "prefer_sass", "load", "vadd"},
                   fake({{"FATPACK_FORCE_PTX_JIT", "1"}}));
  CHECK(api.has("jit=0"));
}

TEST_CASE("boolean environment variables read alike: FALSE and Off are off, TRUE and On are on") {
  // One parser for every boolean variable (runtime/src/env.hpp): CUDA_FORCE_PTX_JIT=FALSE used to
  // force a JIT on every load (only lower-case 0/false/off/no counted as off), while
  // FATPACK_CACHE_DISABLE=FALSE meant off.
  for (const char* var : {"CUDA_FORCE_PTX_JIT", "FATPACK_FORCE_PTX_JIT"}) {
    for (const char* off : {"FALSE", "Off", "No", "0", "bogus"}) {
      auto r = probe({"--package", full_package(), "load", "vadd"}, fake({{var, off}}));
      INFO(var << "=" << off << "\n" << r.out << r.err);
      CHECK(r.has("target=sm_90 jit=0"));
    }
    for (const char* on : {"TRUE", "On", "yes"}) {
      auto r = probe({"--package", full_package(), "load", "vadd"}, fake({{var, on}}));
      INFO(var << "=" << on << "\n" << r.out << r.err);
      CHECK(r.has("jit=1"));
    }
  }
  auto d = probe({"--package", ptx_package(), "load", "vadd"}, fake({{"CUDA_DISABLE_PTX_JIT", "OFF"}}));
  CHECK(d.has("jit=1"));
}

TEST_CASE("FATPACK_LOG=info: the chosen entry and why every other was refused, on stderr") {
  auto r = probe({"--package", full_package(), "load", "vadd"}, fake({{"FATPACK_LOG", "info"}}));
  CHECK(r.status == 0);
  CHECK(r.err_has("fatpack: info: module 'vadd' (package 'proc_full') on device 0"));
  CHECK(r.err_has("fatpack: info:   candidate entry 2 sm_90: chosen: "));
  CHECK(r.err_has("fatpack: info:   candidate entry 0 sm_75: rejected: "));
  CHECK(r.err_has("fatpack: info:   candidate entry 1 sm_80: rejected: "));
  CHECK(r.err_has("fatpack: info:   loaded entry 2 sm_90 (SASS)"));
  auto quiet = probe({"--package", full_package(), "load", "vadd"}, fake());
  CHECK(quiet.err.empty());  // off by default
}

TEST_CASE("two-device process: different CCs get different entries") {
  auto r = probe({"--package", full_package(), "--device", "0", "load", "vadd", "--device", "1", "load", "vadd",
                  "--device", "2", "load", "vadd"},
                 fake({{"FAKECUDA_DEVICES", "90,75,86"}}));
  CHECK(r.has("load vadd device=0 ok entry=2 target=sm_90 jit=0"));
  CHECK(r.has("load vadd device=1 ok entry=0 target=sm_75 jit=0"));
  CHECK(r.has("load vadd device=2 ok entry=1 target=sm_80 jit=0"));
}

TEST_CASE("an unknown future GPU (CC 13.0) takes the PTX path") {
  auto r = probe({"--package", full_package(), "load", "vadd"}, fake({{"FAKECUDA_DEVICES", "130"}}));
  CHECK(r.has("load vadd device=0 ok entry=3 target=compute_80 (PTX ISA 9.0) jit=1"));
}

TEST_CASE("JIT counting across processes, and one JIT for two devices of one CC") {
  std::string log = temp_dir() + "/proc-jit.log";
  auto a = probe({"--package", ptx_package(), "load", "vadd"}, fake({{"FAKECUDA_JIT_LOG", log}}));
  auto b = probe({"--package", ptx_package(), "load", "vadd"}, fake({{"FAKECUDA_JIT_LOG", log}}));
  CHECK(a.status == 0);
  CHECK(b.status == 0);
  CHECK(count_lines(log) == 2);  // no cache yet (issue 4): each process compiles
  std::string log2 = temp_dir() + "/proc-jit2.log";
  auto c = probe({"--package", ptx_package(), "--device", "0", "load", "vadd", "--device", "1", "load", "vadd"},
                 fake({{"FAKECUDA_JIT_LOG", log2}, {"FAKECUDA_DEVICES", "86,86"}}));
  CHECK(c.has("load vadd device=1 ok entry=0 target=compute_80 (PTX ISA 9.0) jit=1 reused=1"));
  CHECK(count_lines(log2) == 1);
  // Warm-up on the pool, then the load reuses it.
  std::string log3 = temp_dir() + "/proc-jit3.log";
  auto w = probe({"--package", ptx_package(), "--threads", "2", "--warm", "load", "vadd"},
                 fake({{"FAKECUDA_JIT_LOG", log3}, {"FAKECUDA_DEVICES", "90,86"}}));
  CHECK(w.has("warm jobs=2 ok"));
  CHECK(w.has("reused=1"));
  CHECK(count_lines(log3) == 2);
}

TEST_CASE("the trace tells SASS reused from the JIT cache from SASS reused from this process's own compile") {
  // Both read "(JIT from PTX, SASS reused)": a user could not tell whether the disk cache answered.
  const std::string cache = temp_dir() + "/proc-from-cache";
  REQUIRE(std::system(("rm -rf '" + cache + "'").c_str()) == 0);
  const env_map env = fake({{"FAKECUDA_DEVICES", "90,90"}, {"FATPACK_CACHE_PATH", cache}, {"FATPACK_LOG", "info"}});
  const std::vector<std::string> two_loads{"--package", ptx_package(), "--device", "0", "load", "vadd",
                                           "--device",  "1",           "load",     "vadd", "cache-wait"};
  // First process: device 0 compiles (and stores), device 1 reuses that compile.
  auto first = probe(two_loads, env);
  CHECK(first.status == 0);
  CHECK(first.err_has("loaded entry 0 compute_80 (PTX ISA 9.0) (JIT from PTX): "));
  CHECK(first.err_has("loaded entry 0 compute_80 (PTX ISA 9.0) (JIT from PTX, SASS reused): "));
  CHECK_FALSE(first.err_has("SASS reused from the JIT cache"));
  CHECK(first.has("load vadd device=0 ok entry=0 target=compute_80 (PTX ISA 9.0) jit=1 reused=0 "));
  CHECK(first.has("load vadd device=1 ok entry=0 target=compute_80 (PTX ISA 9.0) jit=1 reused=1 "));
  CHECK_FALSE(first.has("from_cache=1"));  // load_report::jit_from_cache
  // The try lines say it too (before: "JIT reused 0.001 ms" either way).
  CHECK(first.err_has(" from this process's compile, "));
  CHECK_FALSE(first.err_has("from the JIT cache, "));
  // Second process: device 0's SASS comes from the cache.
  auto second = probe(two_loads, env);
  CHECK(second.status == 0);
  CHECK(second.err_has("loaded entry 0 compute_80 (PTX ISA 9.0) (JIT from PTX, SASS reused from the JIT cache): "));
  CHECK_FALSE(second.err_has("(JIT from PTX): "));
  CHECK(second.err_has("ok (JIT reused "));
  CHECK(second.err_has(" from the JIT cache, "));
  CHECK_FALSE(second.err_has("from this process's compile"));
  const auto at = second.out.find("load vadd device=0 ok entry=0 target=compute_80 (PTX ISA 9.0) jit=1 reused=1 ");
  REQUIRE(at != std::string::npos);
  CHECK(second.out.substr(at, second.out.find('\n', at) - at).find(" from_cache=1") != std::string::npos);
}

TEST_CASE("nvJitLink back end links a link group of real relocatable PTX (separate compilation)") {
  if (access(NVJITLINK_PATH, R_OK) != 0) {
    MESSAGE("skipped: no " << NVJITLINK_PATH);
    return;
  }
  // rdc_kernel.cu's kernel calls rdc_device.cu's rdc_scale: the real linker must resolve it.
  auto group = entries_of("rdc", {"rdc_kernel.compute_90.rdc.ptx", "rdc_device.compute_90.rdc.ptx"});
  for (std::size_t k = 0; k < group.size(); ++k) {
    group[k].link_part = static_cast<std::uint16_t>(k);
    group[k].link_parts = 2;
  }
  const auto both = package_file("proc_rdc", group);
  auto lone = group[0];
  lone.link_part = lone.link_parts = 0;
  const auto alone = package_file("proc_rdc_alone", {lone});
  auto r = probe({"--package", both, "load", "rdc"},
                 fake({{"FATPACK_JIT_BACKEND", "nvjitlink"}, {"FATPACK_NVJITLINK", NVJITLINK_PATH}}));
  CHECK(r.status == 0);
  CHECK(r.has("load rdc device=0 ok entry=0 target=compute_90 (PTX ISA 9.0) [2 linked parts] jit=1"));
  CHECK(r.has("via nvjitlink 13."));
  // The kernel's part alone: nvJitLink refuses the unresolved call (no fallback to cuLink, which
  // would refuse it too), and the load fails instead of loading a module without rdc_scale.
  auto a = probe({"--package", alone, "load", "rdc"},
                 fake({{"FATPACK_JIT_BACKEND", "nvjitlink"}, {"FATPACK_NVJITLINK", NVJITLINK_PATH}}));
  CHECK(a.has("load rdc error=jit_failed"));
  CHECK(a.has("nvJitLinkComplete"));
}

TEST_CASE("LTO-IR link group: nvJitLink links real nvcc -dlto output; the PTX group without nvJitLink") {
  if (access(NVJITLINK_PATH, R_OK) != 0) {
    MESSAGE("skipped: no " << NVJITLINK_PATH);
    return;
  }
  const auto pkg = package_file("proc_lto", lto_and_ptx_groups());
  // The default backend (cuLink) for PTX: LTO-IR still goes through nvJitLink, the only linker of it.
  // The fake driver validates and loads the real sm_90 cubin nvJitLink made; its JIT log stays empty.
  const std::string log = temp_dir() + "/lto-jit.log";
  auto r = probe({"--package", pkg, "load", "rdc"},
                 fake({{"FATPACK_NVJITLINK", NVJITLINK_PATH}, {"FAKECUDA_JIT_LOG", log}, {"FATPACK_LOG", "info"}}));
  CHECK(r.status == 0);
  CHECK(r.has("load rdc device=0 ok entry=0 target=lto_90 [2 linked parts] jit=1"));
  CHECK(r.has("via nvjitlink 13."));
  CHECK(r.has("(LTO)"));
  CHECK(count_lines(log) == 0);
  CHECK(r.err_has("lto_90 LTO-IR links for CC 9.0 through nvJitLink 13."));
  CHECK(r.err_has("loaded entry 0 lto_90 [2 linked parts] (JIT from LTO-IR): "));
  // No nvJitLink: the LTO-IR group is refused with the reason, and the PTX group loads through cuLink.
  auto none = probe({"--package", pkg, "load", "rdc"},
                    fake({{"FATPACK_NVJITLINK", "/nonexistent/libnvJitLink.so"}, {"FATPACK_LOG", "info"}}));
  CHECK(none.status == 0);
  CHECK(none.has("load rdc device=0 ok entry=2 target=compute_90 (PTX ISA 9.0) [2 linked parts] jit=1"));
  CHECK(none.has("via culink"));
  CHECK(none.err_has("lto_90 LTO-IR needs nvJitLink, and none is loaded"));
  // A device older than the IR (CC 8.9; nvJitLink refuses lto_90 for sm_89) and one newer than the
  // library knows (CC 13.0): both refused by selection, the PTX group next (CC 8.9: nothing fits).
  auto newer = probe({"--package", pkg, "load", "rdc"},
                     fake({{"FATPACK_NVJITLINK", NVJITLINK_PATH}, {"FAKECUDA_DEVICES", "130"}, {"FATPACK_LOG", "info"}}));
  CHECK(newer.has("load rdc device=0 ok entry=2 target=compute_90 (PTX ISA 9.0) [2 linked parts] jit=1"));
  CHECK(newer.err_has("nvJitLink 13.0 cannot link for CC 13.0"));
  // The kernel's LTO-IR alone does not link (the callee's IR is missing): the load falls back to PTX.
  auto parts = lto_and_ptx_groups();
  parts[0].link_part = parts[0].link_parts = 0;
  parts.erase(parts.begin() + 1);
  const auto half = package_file("proc_lto_half", parts);
  auto h = probe({"--package", half, "load", "rdc"}, fake({{"FATPACK_NVJITLINK", NVJITLINK_PATH}}));
  CHECK(h.has("load rdc device=0 ok entry=1 target=compute_90 (PTX ISA 9.0) [2 linked parts] jit=1"));
}

TEST_CASE("LTO-IR beside SASS that fits: nvJitLink is not even loaded") {
  if (access(NVJITLINK_PATH, R_OK) != 0) {
    MESSAGE("skipped: no " << NVJITLINK_PATH);
    return;
  }
  auto entries = lto_and_ptx_groups();
  auto sass = entries_of("rdc", {"vadd.sm_90.cubin"});  // any sm_90 cubin: this load only selects and loads
  entries.insert(entries.end(), sass.begin(), sass.end());
  const auto pkg = package_file("proc_lto_sass", entries);
  // LD_DEBUG=files names every library the dynamic loader opens, dlopen() included.
  auto r = probe({"--package", pkg, "load", "rdc"},
                 fake({{"FATPACK_NVJITLINK", NVJITLINK_PATH}, {"FATPACK_LOG", "info"}, {"LD_DEBUG", "files"}}));
  CHECK(r.status == 0);
  CHECK(r.has("target=sm_90 jit=0"));
  CHECK(r.err_has("LTO-IR not considered: SASS fits the device, so nvJitLink was not loaded"));
  CHECK_FALSE(r.err_has("libnvJitLink"));
  // On a device the SASS does not fit, the LTO-IR group is ranked and linked as before.
  auto lto = probe({"--package", pkg, "load", "rdc"},
                   fake({{"FATPACK_NVJITLINK", NVJITLINK_PATH}, {"FAKECUDA_DEVICES", "100"}, {"FATPACK_LOG", "info"}}));
  CHECK(lto.has("target=lto_90 [2 linked parts] jit=1"));
}

TEST_CASE("nvJitLink back end: real SASS without the driver's JIT; cuLink for archs it does not know") {
  if (access(NVJITLINK_PATH, R_OK) != 0) {
    MESSAGE("skipped: no " << NVJITLINK_PATH);
    return;
  }
  std::string log = temp_dir() + "/nvjitlink-jit.log";
  auto r = probe({"--package", ptx_package(), "--device", "0", "load", "vadd", "--device", "1", "load", "vadd"},
                 fake({{"FATPACK_JIT_BACKEND", "nvjitlink"}, {"FATPACK_NVJITLINK", NVJITLINK_PATH},
                       {"FAKECUDA_DEVICES", "90,130"}, {"FAKECUDA_JIT_LOG", log}}));
  CHECK(r.status == 0);
  // Device 0 (CC 9.0): nvJitLink made a real sm_90 cubin, which the fake driver validated and loaded.
  CHECK(r.has("load vadd device=0 ok entry=0 target=compute_80 (PTX ISA 9.0) jit=1"));
  CHECK(r.has("via nvjitlink 13."));
  // Device 1 (CC 13.0, newer than the library): the driver's cuLink JIT, the only one the fake counts.
  CHECK(r.has("load vadd device=1 ok entry=0 target=compute_80 (PTX ISA 9.0) jit=1"));
  CHECK(r.has("via culink"));
  CHECK(count_lines(log) == 1);
  // No library: a warning, then cuLink.
  auto missing = probe({"--package", ptx_package(), "load", "vadd"},
                       fake({{"FATPACK_JIT_BACKEND", "nvjitlink"}, {"FATPACK_NVJITLINK", "/nonexistent/libnvJitLink.so"},
                             {"FATPACK_LOG", "warn"}}));
  CHECK(missing.status == 0);
  CHECK(missing.has("via culink"));
  CHECK(missing.err_has("fatpack: warn: cannot load nvJitLink /nonexistent/libnvJitLink.so"));
}

#ifdef PROBE_CLI_EMBED_PATH
TEST_CASE("fatpack embed output: packages in the executable and in a shared library are found") {
  auto r = run_child({PROBE_CLI_EMBED_PATH, "load", "vadd_exe", "load", "vadd_dso"}, fake());
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(r.has("load vadd_exe device=0 ok entry=2 target=sm_90 jit=0"));
  CHECK(r.has("load vadd_dso device=0 ok entry=2 target=sm_90 jit=0"));
  CHECK(r.has("(package 'emb_exe')"));
  CHECK(r.has("(package 'emb_dso')"));
}
#endif

TEST_CASE("a fork() child of a process that initialised CUDA gets a clear error and never hangs") {
  // The parent loads (cuInit, a JIT on the pool through --warm) and forks; the child tries init,
  // load_module and warm().wait(). Before: the child used the parent's driver state and could wait
  // for ever on a task the parent's pool threads (absent in the child) were running.
  auto r = probe({"--package", full_package(), "--threads", "2", "--warm", "load", "vadd", "fork", "vadd"},
                 fake({{"FATPACK_FORCE_PTX_JIT", "1"}, {"FATPACK_CACHE_DISABLE", "1"}}));
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  CHECK(r.has("fork status=0 init=cuda load=cuda warm=cuda done=1 refresh=returned"));
  CHECK(r.has("is a fork() child of process"));
  CHECK(r.has("CUDA cannot be used in a child after the parent's cuInit"));
}

TEST_CASE("FATPACK_JIT_THREADS out of range or garbage: one warning and the default, never an abort") {
  // Before: the value went unchecked into the pool's size (-1 is 4294967295 threads).
  for (const char* v : {"-1", "100000", "abc", "8x"}) {
    auto r = probe({"--package", ptx_package(), "--warm", "load", "vadd"},
                   fake({{"FATPACK_JIT_THREADS", v}, {"FATPACK_LOG", "warn"}}));
    INFO(v << ": " << r.out << r.err);
    CHECK(r.status == 0);
    CHECK(r.has("load vadd device=0 ok"));
    CHECK(r.err_has(std::string("FATPACK_JIT_THREADS=") + v + " is not a thread count"));
  }
  auto ok = probe({"--package", ptx_package(), "--warm", "load", "vadd"},
                  fake({{"FATPACK_JIT_THREADS", "3"}, {"FATPACK_LOG", "warn"}}));
  CHECK(ok.status == 0);
  CHECK_FALSE(ok.err_has("FATPACK_JIT_THREADS"));
}

TEST_CASE("default log level: the first warning of a process gets one line; FATPACK_LOG=off none, warn all") {
  // Two degradations: a garbage thread count and a missing nvJitLink (cuLink is used instead).
  auto run = [](const char* log) {
    env_map extra{{"FATPACK_JIT_THREADS", "abc"}, {"FATPACK_JIT_BACKEND", "nvjitlink"},
                  {"FATPACK_NVJITLINK", "/nonexistent/libnvJitLink.so"}};
    if (log) extra["FATPACK_LOG"] = log;
    auto r = probe({"--package", ptx_package(), "--warm", "load", "vadd"}, fake(extra));
    CHECK(r.status == 0);
    CHECK(r.has("load vadd device=0 ok"));
    std::size_t lines = 0;
    for (std::size_t p = r.err.find("fatpack: "); p != std::string::npos; p = r.err.find("fatpack: ", p + 1)) ++lines;
    return std::make_pair(lines, r.err);
  };
  auto [quiet_default, err_default] = run(nullptr);  // before: nothing at all
  INFO(err_default);
  CHECK(quiet_default == 1);
  CHECK(err_default.find("fatpack: warn: ") != std::string::npos);
  CHECK(err_default.find("FATPACK_LOG=warn shows all") != std::string::npos);
  CHECK(run("off").first == 0);
  auto [all, err_all] = run("warn");
  INFO(err_all);
  CHECK(all >= 2);
  CHECK(err_all.find("FATPACK_LOG=warn shows all") == std::string::npos);
  // Any case names the level; a value that names none is the default plus a line saying so (before,
  // both silenced every line, the first warning too).
  auto [upper, err_upper] = run("WARN");
  INFO(err_upper);
  CHECK(upper == all);
  auto [typo, err_typo] = run("verbose\x1b[2J");
  INFO(err_typo);
  CHECK(typo == 2);
  CHECK(err_typo.find("FATPACK_LOG='verbose\\x1b[2J' names no level") != std::string::npos);
  CHECK(err_typo.find("FATPACK_LOG=warn shows all") != std::string::npos);
  // A program that sets a log callback before anything else gets that line too, nothing on stderr
  // (before, it went to stderr while the callback was being set).
  auto sunk = probe({"--log-sink", "devices"}, fake({{"FATPACK_LOG", "verbose"}}));
  INFO(sunk.out << sunk.err);
  CHECK(sunk.status == 0);
  CHECK(sunk.has("sink| 2: FATPACK_LOG='verbose' names no level"));
  CHECK(sunk.err.find("names no level") == std::string::npos);
}

TEST_CASE("driver_entry_point's default ABI: cuda.h 13.0's, or an older driver's own") {
  // A 12.x driver refuses a request for the 13.0 ABI: the default asks for its own (before this
  // default existed, 13000 failed every lookup there; 12000 gave cuCtxCreate's CUDA 12 entry point
  // on a 13.x driver, whose arguments differ from cuda.h 13.0's cuCtxCreate).
  for (const char* version : {"12080", "13000"}) {
    CAPTURE(version);
    auto r = probe({"entry", "cuLaunchKernel", "entry", "cuCtxCreate", "entry", "cuCtxSetCurrent"},
                   fake({{"FAKECUDA_DRIVER_VERSION", version}}));
    INFO(r.out << r.err);
    CHECK(r.status == 0);
    CHECK(r.has("entry cuLaunchKernel ok"));
    CHECK(r.has("entry cuCtxCreate ok"));
    CHECK(r.has("entry cuCtxSetCurrent ok"));
  }
}

TEST_CASE("FATPACK_JIT_BACKEND: any case names the back end; anything else is a warning, not silently culink") {
  auto run = [](const char* backend) {
    return probe({"--package", ptx_package(), "load", "vadd"},
                 fake({{"FATPACK_JIT_BACKEND", backend}, {"FATPACK_NVJITLINK", "/nonexistent/libnvJitLink.so"},
                       {"FATPACK_LOG", "warn"}, {"FATPACK_CACHE_DISABLE", "1"}}));
  };
  auto typo = run("nvjitlnk");  // before: culink, not a word said
  INFO(typo.err);
  CHECK(typo.has("load vadd device=0 ok"));
  CHECK(typo.err.find("FATPACK_JIT_BACKEND='nvjitlnk' is neither culink nor nvjitlink; using culink") != std::string::npos);
  auto upper = run("NVJITLINK");  // nvJitLink asked for (missing here: the fallback's warning says so)
  INFO(upper.err);
  CHECK(upper.has("load vadd device=0 ok"));
  CHECK(upper.err.find("is neither") == std::string::npos);
  CHECK(upper.err.find("nvJitLink") != std::string::npos);
}

TEST_CASE("log lines on stderr carry no control characters from the text they quote") {
  // FATPACK_JIT_THREADS is quoted in its warning; so are a cache entry's key text and a driver's log.
  // Before: written as they were (terminal escapes, a carriage return that overwrites the line).
  auto r = probe({"--package", ptx_package(), "--warm", "load", "vadd"},
                 fake({{"FATPACK_JIT_THREADS", "7\x1b[2J\x1b[31mred\rfatpack: error: forged\x7f"}, {"FATPACK_LOG", "warn"}}));
  CHECK(r.status == 0);
  INFO(r.err);
  CHECK(r.err.find("FATPACK_JIT_THREADS=7?[2J?[31mred?fatpack: error: forged? is not a thread count") != std::string::npos);
  for (char ch : r.err) CHECK_FALSE(((static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f));
}

TEST_CASE("a registered .fpk rewritten in place (cp over it) is still loaded from the bytes read at registration") {
  // Before: add_package_file mapped the file; truncating it made the next read of the mapping SIGBUS
  // (the process died). The probe is a child process, so a SIGBUS fails this test (status != 0).
  const std::string file = temp_dir() + "/rewritten.fpk";
  write_file(file, read_file(full_package()));
  auto r = probe({"--package", file, "rewrite", file, "64", "load", "vadd", "rewrite", file, "0", "--policy",
                  "force_ptx", "load", "vadd"},
                 fake({{"FATPACK_CACHE_DISABLE", "1"}}));
  CHECK(r.status == 0);
  CHECK(r.has("load vadd device=0 ok entry=2 target=sm_90"));
  CHECK(r.has("target=compute_80"));
}
