// nvJitLink back end (see nvjitlink.hpp).
#include "jit/nvjitlink.hpp"

#include "platform/clock.hpp"
#include "platform/load_once.hpp"
#include "platform/os.hpp"

#include <nvJitLink.h>

#include <cstdint>
#include <vector>

namespace fatpack::detail {

namespace {

// Types and constants from the toolkit's nvJitLink.h (header only; the library is dlopen-ed).
using handle = nvJitLinkHandle;
using create_fn = decltype(&__nvJitLinkCreate_13_0);
using destroy_fn = decltype(&__nvJitLinkDestroy_13_0);
using add_data_fn = decltype(&__nvJitLinkAddData_13_0);
using complete_fn = decltype(&__nvJitLinkComplete_13_0);
using size_fn = decltype(&__nvJitLinkGetLinkedCubinSize_13_0);
using get_fn = decltype(&__nvJitLinkGetErrorLog_13_0);
using get_cubin_fn = decltype(&__nvJitLinkGetLinkedCubin_13_0);
using version_fn = decltype(&nvJitLinkVersion);

constexpr int k_success = NVJITLINK_SUCCESS;
constexpr int k_unrecognized_arch = NVJITLINK_ERROR_UNRECOGNIZED_ARCH;
constexpr int k_unsupported_arch = NVJITLINK_ERROR_UNSUPPORTED_ARCH;

const char* const k_names[] = {"__nvJitLinkCreate_13_0",       "__nvJitLinkDestroy_13_0",
                               "__nvJitLinkAddData_13_0",      "__nvJitLinkComplete_13_0",
                               "__nvJitLinkGetLinkedCubinSize_13_0", "__nvJitLinkGetLinkedCubin_13_0",
                               "__nvJitLinkGetErrorLogSize_13_0", "__nvJitLinkGetErrorLog_13_0",
                               "__nvJitLinkGetInfoLogSize_13_0", "__nvJitLinkGetInfoLog_13_0"};

const char* result_name(int r) {
  static const char* const names[] = {"NVJITLINK_SUCCESS",
                                      "NVJITLINK_ERROR_UNRECOGNIZED_OPTION",
                                      "NVJITLINK_ERROR_MISSING_ARCH",
                                      "NVJITLINK_ERROR_INVALID_INPUT",
                                      "NVJITLINK_ERROR_PTX_COMPILE",
                                      "NVJITLINK_ERROR_NVVM_COMPILE",
                                      "NVJITLINK_ERROR_INTERNAL",
                                      "NVJITLINK_ERROR_THREADPOOL",
                                      "NVJITLINK_ERROR_UNRECOGNIZED_INPUT",
                                      "NVJITLINK_ERROR_FINALIZE",
                                      "NVJITLINK_ERROR_NULL_INPUT",
                                      "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS",
                                      "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE",
                                      "NVJITLINK_ERROR_ARCH_MISMATCH",
                                      "NVJITLINK_ERROR_OUTDATED_LIBRARY",
                                      "NVJITLINK_ERROR_MISSING_FATBIN",
                                      "NVJITLINK_ERROR_UNRECOGNIZED_ARCH",
                                      "NVJITLINK_ERROR_UNSUPPORTED_ARCH",
                                      "NVJITLINK_ERROR_LTO_NOT_ENABLED"};
  return r >= 0 && r < static_cast<int>(sizeof names / sizeof names[0]) ? names[r] : "NVJITLINK_ERROR_?";
}

result<const nvjitlink_lib*> do_load() {
  auto* lib = new nvjitlink_lib();  // never freed, like the driver
  const char* env = os::getenv_path("FATPACK_NVJITLINK");
  lib->path = env && *env ? env : "libnvJitLink.so.13";
  std::string why;
  os::library h = os::open_library(lib->path, why);
  if (!h.handle) {
    std::string msg = "cannot load nvJitLink " + lib->path + ": " + why;
    delete lib;
    return error{errc::no_driver, 0, std::move(msg), {}};
  }
  for (std::size_t i = 0; i < sizeof k_names / sizeof k_names[0]; ++i) {
    lib->fns[i] = os::find_symbol(h, k_names[i]);
    if (!lib->fns[i]) {
      std::string msg = lib->path + ": entry point " + k_names[i] + " not found (an nvJitLink older than 13.0?)";
      delete lib;
      return error{errc::driver_symbol_missing, 0, std::move(msg), {}};
    }
  }
  if (auto v = reinterpret_cast<version_fn>(os::find_symbol(h, "nvJitLinkVersion"))) v(&lib->major, &lib->minor);
  return static_cast<const nvjitlink_lib*>(lib);
}

}  // namespace

std::string nvjitlink_lib::identify() const {
  return "nvjitlink " + std::to_string(major) + "." + std::to_string(minor);
}

const result<const nvjitlink_lib*>& load_nvjitlink() {
  static std::atomic<const result<const nvjitlink_lib*>*> loaded{nullptr};  // see platform/load_once.hpp
  return load_once(loaded, do_load);
}

result<jit_output> nvjitlink_compile(const nvjitlink_lib& lib, const std::vector<core::byte_span>& ptx_parts,
                                     std::string_view name, const jit_options& opts, std::uint32_t arch,
                                     core::arch_variant variant, bool& arch_unknown, bool ltoir) {
  arch_unknown = false;
  auto create = reinterpret_cast<create_fn>(lib.fns[0]);
  auto destroy = reinterpret_cast<destroy_fn>(lib.fns[1]);
  auto add = reinterpret_cast<add_data_fn>(lib.fns[2]);
  auto complete = reinterpret_cast<complete_fn>(lib.fns[3]);
  auto cubin_size = reinterpret_cast<size_fn>(lib.fns[4]);
  auto cubin_get = reinterpret_cast<get_cubin_fn>(lib.fns[5]);
  auto err_size = reinterpret_cast<size_fn>(lib.fns[6]);
  auto err_get = reinterpret_cast<get_fn>(lib.fns[7]);
  auto info_size = reinterpret_cast<size_fn>(lib.fns[8]);
  auto info_get = reinterpret_cast<get_fn>(lib.fns[9]);

  std::vector<std::string> words;
  words.push_back("-arch=" + core::sm_name(arch, variant));
  // The entry's options in nvJitLink's syntax (the cuLink path passes the CU_JIT_* equivalents), and
  // a verbose info log, as cuLink's CU_JIT_LOG_VERBOSE gives ("Used 32 registers").
  words.push_back("-verbose");
  if (ltoir) words.push_back("-lto");
  if (opts.optimization_level >= 0) words.push_back("-Xptxas=-O" + std::to_string(opts.optimization_level));
  if (opts.max_registers > 0) words.push_back("-maxrregcount=" + std::to_string(opts.max_registers));
  if (opts.line_info) words.push_back("-lineinfo");
  if (opts.debug_info) words.push_back("-g");
  std::vector<const char*> argv;
  for (const auto& w : words) argv.push_back(w.c_str());

  std::string what(name);
  handle h = nullptr;
  auto read_log = [&](size_fn sz, get_fn get) {
    std::size_t n = 0;
    if (!h || sz(h, &n) != k_success || n == 0) return std::string();
    std::string s(n, '\0');
    if (get(h, &s[0]) != k_success) return std::string();
    while (!s.empty() && (s.back() == '\0' || s.back() == '\n')) s.pop_back();
    return s;
  };
  auto fail = [&](const char* call, nvJitLinkResult r) -> result<jit_output> {
    arch_unknown = r == k_unrecognized_arch || r == k_unsupported_arch;
    std::string log = read_log(err_size, err_get);
    if (h) destroy(&h);
    return error{errc::jit_failed, 0,
                 "JIT of " + what + " (" + lib.identify() + ", " + words[0] + "): " + call + ": " + result_name(r),
                 std::move(log)};
  };
  stopwatch sw;
  nvJitLinkResult r = create(&h, static_cast<std::uint32_t>(argv.size()), argv.data());
  if (r != k_success) return fail("nvJitLinkCreate", r);
  // nvJitLink keeps each input's name and reads it again in nvJitLinkComplete (its error log names
  // the input of an unresolved reference), so the names live as long as the handle. Found by ASan:
  // a name that died with its loop iteration was read after free when a lone part did not link.
  std::vector<std::string> part_names;
  part_names.reserve(ptx_parts.size());
  for (std::size_t k = 0; k < ptx_parts.size(); ++k) {
    part_names.push_back(ptx_parts.size() > 1 ? what + " part " + std::to_string(k) : what);
    r = add(h, ltoir ? NVJITLINK_INPUT_LTOIR : NVJITLINK_INPUT_PTX, ptx_parts[k].data, ptx_parts[k].size,
            part_names.back().c_str());
    if (r != k_success) return fail("nvJitLinkAddData", r);
  }
  r = complete(h);
  if (r != k_success) return fail("nvJitLinkComplete", r);
  std::size_t n = 0;
  r = cubin_size(h, &n);
  if (r != k_success) return fail("nvJitLinkGetLinkedCubinSize", r);
  jit_output out;
  out.sass.resize(n);
  r = cubin_get(h, out.sass.data());
  if (r != k_success) return fail("nvJitLinkGetLinkedCubin", r);
  out.wall_ms = sw.ms();
  out.info_log = read_log(info_size, info_get);
  destroy(&h);
  return out;
}

}  // namespace fatpack::detail
