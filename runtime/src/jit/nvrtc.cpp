// NVRTC back end (see nvrtc.hpp).
#include "jit/nvrtc.hpp"

#include "platform/build_id.hpp"
#include "platform/clock.hpp"
#include "platform/load_once.hpp"
#include "platform/ld_cache.hpp"
#include "platform/log.hpp"
#include "platform/os.hpp"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <dirent.h>
#include <sys/stat.h>

namespace fatpack::detail {

namespace {

// Types from the toolkit's nvrtc.h (header only; the library is dlopen-ed).
using nvrtc_error_string_fn = decltype(&nvrtcGetErrorString);
using nvrtc_version_fn = decltype(&nvrtcVersion);
using nvrtc_num_archs_fn = decltype(&nvrtcGetNumSupportedArchs);
using nvrtc_archs_fn = decltype(&nvrtcGetSupportedArchs);
using nvrtc_create_fn = decltype(&nvrtcCreateProgram);
using nvrtc_destroy_fn = decltype(&nvrtcDestroyProgram);
using nvrtc_compile_fn = decltype(&nvrtcCompileProgram);
using nvrtc_size_fn = decltype(&nvrtcGetPTXSize);
using nvrtc_get_fn = decltype(&nvrtcGetPTX);
using nvrtc_add_name_fn = decltype(&nvrtcAddNameExpression);
using nvrtc_lowered_fn = decltype(&nvrtcGetLoweredName);

enum fn_index : std::size_t {
  f_error_string, f_version, f_num_archs, f_archs, f_create, f_destroy, f_compile, f_ptx_size, f_ptx,
  f_cubin_size, f_cubin, f_log_size, f_log, f_add_name, f_lowered, f_count
};
const char* const k_nvrtc_names[f_count] = {
    "nvrtcGetErrorString", "nvrtcVersion",        "nvrtcGetNumSupportedArchs", "nvrtcGetSupportedArchs",
    "nvrtcCreateProgram",  "nvrtcDestroyProgram", "nvrtcCompileProgram",       "nvrtcGetPTXSize",
    "nvrtcGetPTX",         "nvrtcGetCUBINSize",   "nvrtcGetCUBIN",             "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",  "nvrtcAddNameExpression", "nvrtcGetLoweredName"};
static_assert(sizeof(nvrtc_lib::fns) / sizeof(void*) >= f_count, "nvrtc_lib::fns holds every entry point");

const char* const k_default_names[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
// Where the search looks after LD_LIBRARY_PATH and the loader's cache: first the directories the
// dynamic loader itself searches last (glibc's system directories, Debian's multiarch ones first, in
// the loader's order), so that the file found is the one dlopen of the bare name would load whenever
// dlopen would find one; then the CUDA toolkit's default location, which dlopen does not search.
#if defined(__aarch64__)
#  define FATPACK_MULTIARCH "aarch64-linux-gnu"
#  define FATPACK_CUDA_TARGET "sbsa-linux"
#else
#  define FATPACK_MULTIARCH "x86_64-linux-gnu"
#  define FATPACK_CUDA_TARGET "x86_64-linux"
#endif
const char* const k_default_dirs[] = {"/lib/" FATPACK_MULTIARCH, "/usr/lib/" FATPACK_MULTIARCH,
                                      "/lib64",                  "/usr/lib64",
                                      "/lib",                    "/usr/lib",
                                      "/usr/local/cuda/lib64",   "/usr/local/cuda/targets/" FATPACK_CUDA_TARGET "/lib"};
constexpr std::size_t k_max_search_dirs = 64;
constexpr std::size_t k_max_path = 4096;
constexpr std::size_t k_max_builtins = 8;

const char* const k_install_hint =
    "install NVRTC (the CUDA toolkit's libnvrtc, e.g. Debian's libnvrtc13 or NVIDIA's cuda-nvrtc-13-0 "
    "package), add its directory to LD_LIBRARY_PATH, or set FATPACK_LIBNVRTC=/path/to/libnvrtc.so.13";
// When FATPACK_LIBNVRTC chose the file, the fix is that variable, not a search path.
const char* const k_env_hint =
    "point FATPACK_LIBNVRTC at NVRTC's library (libnvrtc.so.13 of the CUDA toolkit: Debian's libnvrtc13 or "
    "NVIDIA's cuda-nvrtc-13-0 package), or unset it to search the system";

bool chosen_by_env() {
  const char* env = os::getenv_path("FATPACK_LIBNVRTC");
  return env && *env;
}

const char* hint() { return chosen_by_env() ? k_env_hint : k_install_hint; }

bool is_regular_file(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// LD_LIBRARY_PATH's directories (absolute ones only: a relative one depends on the working
// directory); bounded.
std::vector<std::string> env_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = os::getenv_path("LD_LIBRARY_PATH")) {
    std::string_view rest(env, ::strnlen(env, k_max_search_dirs * k_max_path));
    while (!rest.empty() && dirs.size() < k_max_search_dirs) {
      const std::size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      if (!dir.empty() && dir.front() == '/' && dir.size() < k_max_path) dirs.emplace_back(dir);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  return dirs;
}

// The search for a bare library name, in dlopen's order: LD_LIBRARY_PATH, the loader's cache, the
// system directories (then CUDA's, k_default_dirs). The cache file is read at most once per search.
// A damaged cache is skipped, with a debug line when `log_damage` is set.
class library_search {
 public:
  library_search(std::string ld_cache_path, bool log_damage)
      : ld_cache_path_(std::move(ld_cache_path)), log_damage_(log_damage), env_(env_dirs()) {}

  std::string find(const std::string& name) {
    for (const auto& d : env_)
      if (std::string p = d + "/" + name; is_regular_file(p)) return p;
    if (!ld_cache_path_.empty()) {
      if (!cache_read_) {
        cache_ = os::read_ld_cache(ld_cache_path_);
        cache_read_ = true;
        if (cache_.status == os::ld_cache_status::malformed) note(cache_.why);
      }
      if (cache_.status == os::ld_cache_status::found) {
        const os::ld_cache_answer a = os::ld_cache_lookup(cache_.bytes, name);
        if (a.status == os::ld_cache_status::malformed) {
          note(ld_cache_path_ + ": " + a.why);
          cache_.status = os::ld_cache_status::malformed;  // not asked again
        } else if (a.status == os::ld_cache_status::found && is_regular_file(a.path)) {
          return a.path;
        }
      }
    }
    for (const char* d : k_default_dirs)
      if (std::string p = std::string(d) + "/" + name; is_regular_file(p)) return p;
    return {};
  }

  // "dir:dir:...", for the error message.
  std::string searched() const {
    std::string out;
    for (const auto& d : env_) out += (out.empty() ? "" : ":") + d;
    if (!ld_cache_path_.empty()) {
      out += (out.empty() ? "" : ":") + ld_cache_path_;
      if (cache_read_ && cache_.status == os::ld_cache_status::malformed) out += " (ignored: not a cache fatpack reads)";
    }
    for (const char* d : k_default_dirs) out += (out.empty() ? "" : ":") + std::string(d);
    return out;
  }

 private:
  // A damaged cache is not an error (the search goes on without it): a debug line says why.
  void note(const std::string& why) const {
    if (log_damage_ && log_enabled(log_level::debug))
      log_line(log_level::debug, "locating NVRTC: the loader's cache is not used: " + why);
  }

  std::string ld_cache_path_;
  bool log_damage_;
  std::vector<std::string> env_;
  bool cache_read_ = false;
  os::ld_cache_file cache_;
};

// The build-ids of the builtins libraries beside NVRTC's real file ("libnvrtc-builtins.so.13.0
// <hex>"), sorted by name; bounded.
std::string builtins_identity(const std::string& nvrtc_path) {
  char* real = ::realpath(nvrtc_path.c_str(), nullptr);
  if (!real) return {};
  std::string dir(real);
  std::free(real);
  const std::size_t slash = dir.rfind('/');
  dir = slash == std::string::npos ? "." : dir.substr(0, slash);
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    std::size_t seen = 0;
    while (dirent* e = ::readdir(d)) {
      if (++seen > 100000) break;  // a directory of millions of files: stop looking
      const std::string_view n(e->d_name);
      if (n.rfind("libnvrtc-builtins.so.", 0) == 0 && names.size() < k_max_builtins) names.emplace_back(n);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) {
    std::string why;
    const std::string id = os::elf_build_id(dir + "/" + n, why);
    out += "; " + n + " " + (id.empty() ? "(" + why + ")" : id);
  }
  return out;
}

result<nvrtc_location> located_at(const std::string& path) {
  std::string why;
  const std::string id = os::elf_build_id(path, why);
  if (id.empty())
    return error{errc::no_driver, 0, "NVRTC " + path + " cannot be identified: " + why + "; " + hint(), {}};
  const std::size_t slash = path.rfind('/');
  nvrtc_location loc;
  loc.path = path;
  loc.identity = path.substr(slash == std::string::npos ? 0 : slash + 1) + " build-id " + id + builtins_identity(path);
  return loc;
}

std::string nvrtc_result_text(const nvrtc_lib& lib, nvrtcResult r) {
  auto text = reinterpret_cast<nvrtc_error_string_fn>(lib.fns[f_error_string]);
  const char* s = text ? text(r) : nullptr;
  return s ? std::string(s) : "NVRTC error " + std::to_string(static_cast<int>(r));
}

result<nvrtc_location> locate(const std::string& ld_cache_path, bool log_damage);

result<const nvrtc_lib*> load_nvrtc_lib() {
  // Quiet: the caller located NVRTC just before (compile_api.cpp), which logged; this runs inside
  // load_nvrtc's static initialisation, where no application log callback should run.
  auto where = locate(os::k_ld_cache_path, false);
  if (!where) return where.error();
  auto* lib = new nvrtc_lib();  // never freed, like the driver
  lib->where = std::move(where.value());
  std::string why;
  os::library h = os::open_library(lib->where.path, why);
  if (!h.handle) {
    std::string msg = "cannot load NVRTC " + lib->where.path + ": " + why + "; " + hint();
    delete lib;
    return error{errc::no_driver, 0, std::move(msg), {}};
  }
  for (std::size_t i = 0; i < f_count; ++i) {
    lib->fns[i] = os::find_symbol(h, k_nvrtc_names[i]);
    if (!lib->fns[i]) {
      std::string msg = lib->where.path + ": entry point " + k_nvrtc_names[i] + " not found (an NVRTC older than 12.0?)";
      delete lib;
      return error{errc::driver_symbol_missing, 0, std::move(msg), {}};
    }
  }
  reinterpret_cast<nvrtc_version_fn>(lib->fns[f_version])(&lib->major, &lib->minor);
  int n = 0;
  if (reinterpret_cast<nvrtc_num_archs_fn>(lib->fns[f_num_archs])(&n) == NVRTC_SUCCESS && n > 0 && n < 1024) {
    lib->archs.resize(static_cast<std::size_t>(n));
    if (reinterpret_cast<nvrtc_archs_fn>(lib->fns[f_archs])(lib->archs.data()) != NVRTC_SUCCESS) lib->archs.clear();
    std::sort(lib->archs.begin(), lib->archs.end());
  }
  return static_cast<const nvrtc_lib*>(lib);
}

result<nvrtc_location> locate(const std::string& ld_cache_path, bool log_damage) {
  library_search search(ld_cache_path, log_damage);
  if (const char* env = os::getenv_path("FATPACK_LIBNVRTC"); env && *env) {
    const std::string value(env, ::strnlen(env, k_max_path));
    if (value.size() >= k_max_path)
      return error{errc::invalid_argument, 0, "FATPACK_LIBNVRTC is longer than " + std::to_string(k_max_path) + " bytes", {}};
    std::string path = value.find('/') != std::string::npos ? value : search.find(value);
    if (path.empty() || !is_regular_file(path))
      return error{errc::no_driver, 0,
                   "FATPACK_LIBNVRTC=" + value + ": " +
                       (value.find('/') != std::string::npos ? std::string("not a readable regular file")
                                                             : "no such library in " + search.searched()) +
                       "; " + k_env_hint,
                   {}};
    return located_at(path);
  }
  for (const char* name : k_default_names)
    if (std::string p = search.find(name); !p.empty()) return located_at(p);
  return error{errc::no_driver, 0,
               "NVRTC not found: neither libnvrtc.so.13 nor libnvrtc.so.12 is in " + search.searched() + "; " +
                   k_install_hint,
               {}};
}

}  // namespace

result<nvrtc_location> locate_nvrtc() { return locate(os::k_ld_cache_path, true); }

result<nvrtc_location> locate_nvrtc(const std::string& ld_cache_path) { return locate(ld_cache_path, true); }

std::string nvrtc_lib::identify() const {
  return "NVRTC " + std::to_string(major) + "." + std::to_string(minor) + " (" + where.path + ")";
}

bool nvrtc_lib::supports(int arch) const { return std::find(archs.begin(), archs.end(), arch) != archs.end(); }

namespace {
std::atomic<const nvrtc_lib*> g_loaded{nullptr};  // the library load_nvrtc published, once it has
}  // namespace

const result<const nvrtc_lib*>& load_nvrtc() {
  static std::atomic<const result<const nvrtc_lib*>*> loaded{nullptr};  // see platform/load_once.hpp
  const auto& r = load_once(loaded, load_nvrtc_lib);
  // Every caller stores the one published value: loaded_nvrtc() never names a library that lost.
  if (r) g_loaded.store(r.value(), std::memory_order_release);
  return r;
}

const nvrtc_lib* loaded_nvrtc() { return g_loaded.load(std::memory_order_acquire); }

result<nvrtc_output> nvrtc_compile(const nvrtc_lib& lib, const nvrtc_input& in, const std::string& arch) {
  auto create = reinterpret_cast<nvrtc_create_fn>(lib.fns[f_create]);
  auto destroy = reinterpret_cast<nvrtc_destroy_fn>(lib.fns[f_destroy]);
  auto compile = reinterpret_cast<nvrtc_compile_fn>(lib.fns[f_compile]);
  auto add_name = reinterpret_cast<nvrtc_add_name_fn>(lib.fns[f_add_name]);
  auto lowered = reinterpret_cast<nvrtc_lowered_fn>(lib.fns[f_lowered]);
  auto log_size = reinterpret_cast<nvrtc_size_fn>(lib.fns[f_log_size]);
  auto log_get = reinterpret_cast<nvrtc_get_fn>(lib.fns[f_log]);
  const bool want_ptx = arch.rfind("compute_", 0) == 0;
  auto code_size = reinterpret_cast<nvrtc_size_fn>(lib.fns[want_ptx ? f_ptx_size : f_cubin_size]);
  auto code_get = reinterpret_cast<nvrtc_get_fn>(lib.fns[want_ptx ? f_ptx : f_cubin]);

  const std::string program(in.program_name);
  const std::string source(in.source);  // NVRTC takes a NUL-terminated string
  std::vector<const char*> header_texts, header_names;
  for (const auto& h : in.headers) {
    header_names.push_back(h.first.c_str());
    header_texts.push_back(h.second.c_str());
  }
  std::vector<std::string> words;
  words.push_back("-arch=" + arch);
  for (const auto& o : in.options) words.push_back(o);
  std::vector<const char*> argv;
  for (const auto& w : words) argv.push_back(w.c_str());

  nvrtcProgram prog = nullptr;
  auto read_log = [&]() {
    std::size_t n = 0;
    if (!prog || log_size(prog, &n) != NVRTC_SUCCESS || n <= 1) return std::string();
    std::string s(n, '\0');
    if (log_get(prog, &s[0]) != NVRTC_SUCCESS) return std::string();
    while (!s.empty() && (s.back() == '\0' || s.back() == '\n')) s.pop_back();
    return s;
  };
  auto fail = [&](const char* call, nvrtcResult r) -> result<nvrtc_output> {
    std::string log = read_log();
    if (prog) destroy(&prog);
    return error{errc::jit_failed, 0,
                 "NVRTC compile of " + program + " (" + lib.identify() + ", -arch=" + arch + "): " + call + ": " +
                     nvrtc_result_text(lib, r),
                 std::move(log)};
  };
  stopwatch sw;
  nvrtcResult r = create(&prog, source.c_str(), program.c_str(), static_cast<int>(header_texts.size()),
                         header_texts.data(), header_names.data());
  if (r != NVRTC_SUCCESS) return fail("nvrtcCreateProgram", r);
  for (const auto& e : in.name_expressions) {
    r = add_name(prog, e.c_str());
    if (r != NVRTC_SUCCESS) return fail("nvrtcAddNameExpression", r);
  }
  r = compile(prog, static_cast<int>(argv.size()), argv.data());
  if (r != NVRTC_SUCCESS) return fail("nvrtcCompileProgram", r);
  nvrtc_output out;
  out.ptx = want_ptx;
  for (const auto& e : in.name_expressions) {
    const char* name = nullptr;
    r = lowered(prog, e.c_str(), &name);
    if (r != NVRTC_SUCCESS || !name) return fail("nvrtcGetLoweredName", r);
    out.lowered.emplace_back(e, name);
  }
  std::size_t n = 0;
  r = code_size(prog, &n);
  if (r != NVRTC_SUCCESS) return fail(want_ptx ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize", r);
  out.code.resize(n);
  if (n > 0) {
    r = code_get(prog, reinterpret_cast<char*>(out.code.data()));
    if (r != NVRTC_SUCCESS) return fail(want_ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN", r);
  }
  out.log = read_log();
  out.wall_ms = sw.ms();
  destroy(&prog);
  return out;
}

}  // namespace fatpack::detail
