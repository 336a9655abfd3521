// fakecuda: a test-only stand-in for libcuda.so.1, loaded by fatpack through FATPACK_LIBCUDA.
//
// It exports cuGetProcAddress / cuGetProcAddress_v2 (the only symbols fatpack takes with dlsym) and
// answers the driver entry points fatpack uses; it also exports the few plain cu* symbols a program
// linked against libcuda calls before its kernels run (end of file), so such a program can run
// against it as libcuda.so.1. It models what the real driver checks, so that the
// runtime's selection, fallback and JIT orchestration can be tested on a machine without a GPU:
//  - module loads validate the image: a cubin (ELF, e_machine 190) must be for the device's CC
//    (same major, minor <= device; `a` cubins for exactly that CC), else CUDA_ERROR_NO_BINARY_FOR_GPU;
//    PTX must not be newer than the JIT's ISA limit (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222);
//  - the "JIT" (cuLinkCreate/AddData/Complete) checks ISA and target like ptxas and returns a
//    deterministic fake cubin derived from the PTX: a valid ELF with e_machine 190, the SM in e_flags,
//    an .nv.compat record (arch-specific flag) and one STT_FUNC symbol per .entry, so fatpack's own
//    cubin parser reads it and the fake's module load accepts it.
//  - cuLink takes several PTX inputs (cuLinkAddData checks each one as above; cuLinkComplete links
//    them): every `.extern .func` of an input must be defined (`.func`, `.visible .func`, `.weak
//    .func`) by some input, else cuLinkComplete fails with CUDA_ERROR_INVALID_PTX and an nvlink-style
//    "Undefined reference to '<name>'" in the error log. The cubin carries every input's kernels,
//    parameters and globals; one input hashes as before, several hash over their hashes. A PTX given
//    to cuModuleLoadData(Ex) is one input, so an unresolved extern fails the load the same way
//    (relocatable PTX needs a link). Only functions are modelled (not .extern .global variables).
//
// Configuration (environment):
//   FAKECUDA_DEVICES=90,86        CC per device (major*10+minor; "9.0" also accepted); "" = no device
//   FAKECUDA_DRIVER_VERSION=13000 what cuDriverGetVersion returns
//   FAKECUDA_MAX_PTX_ISA=9.0      highest PTX ISA the JIT accepts (default: from the driver version)
//   FAKECUDA_JIT_DELAY_MS=0       time each JIT takes: a sleep of n ms per PTX input checked (the
//                                 module-load JIT of cuModuleLoadData(Ex), each cuLinkAddData before
//                                 cuLinkComplete), so a one-input JIT takes n ms (tests of nodes
//                                 starting together, compile locks, timeouts)
//   FAKECUDA_FAIL_JIT=1           every JIT fails (CUDA_ERROR_INVALID_PTX, with an error log)
//   FAKECUDA_FAIL_LOAD=list       module loads of these images fail with CUDA_ERROR_INVALID_IMAGE:
//                                 "all", "sass" / "sm_90"... (shipped cubins), "ptx" (PTX given to
//                                 cuModuleLoadData), "jit" (cubins made by the fake JIT),
//                                 "jit-other-driver" (fake-JIT cubins another driver version made,
//                                 as a real driver may refuse SASS from a newer one)
//   FAKECUDA_JIT_LOG=/path        each JIT appends one line "<pid> <how> sm_<NN> <ptx-hash> opts=<o> <name>",
//                                 <o> the JIT options cuLinkCreate was given, comma-separated in this
//                                 order: O<n> (CU_JIT_OPTIMIZATION_LEVEL), maxrregcount=<n>
//                                 (CU_JIT_MAX_REGISTERS), lineinfo (CU_JIT_GENERATE_LINE_INFO), debug
//                                 (CU_JIT_GENERATE_DEBUG_INFO); "-" for none. cuLinkCreate refuses an
//                                 optimization level above 4 or a register count of 0 or above 255 with
//                                 CUDA_ERROR_INVALID_VALUE (fatpack must never pass one); the options
//                                 are part of the fake cubin's note, so other options give other bytes
//   FAKECUDA_MISSING=cuLinkCreate,... entry points cuGetProcAddress pretends not to have
//   FAKECUDA_INIT_ERROR=<code>    cuInit returns this CUresult
//   FAKECUDA_INIT_DELAY_MS=n      cuInit sleeps n ms, then goes through the dynamic loader (dlopen of
//                                 libc, RTLD_NOLOAD), as a real driver's initialisation loads its own
//                                 components: a test can hold a first driver load inside cuInit while
//                                 another thread holds the loader's lock (a library's constructor)
//   FAKECUDA_LOAD_ERROR=<code>[:n] after n module loads that succeed (default 0), every module load
//                                 returns this CUresult: 2 = out of memory, 46 = device unavailable
//                                 (a device lost in the middle of a process's loads)
//   FAKECUDA_CAPTURING=1          a stream is being captured in global mode: a module load from a
//                                 thread whose capture mode (cuThreadExchangeStreamCaptureMode, global
//                                 by default) is not relaxed fails with
//                                 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, as an unsafe call would
//   FAKECUDA_INTEGRATED=1         devices report CU_DEVICE_ATTRIBUTE_INTEGRATED
// Static settings (devices, version) are read once; the failure knobs on every call, so a test can
// switch them between loads.
//
// Kernels are found by their symbol only (cuModuleGetFunction, cuLibraryGetKernel), as the real
// driver finds them: the mangled name for C++ kernels; entry functions of a cubin count whether their
// symbol is global, weak or local (anonymous namespace, `static`), those of PTX by their `.entry` lines.
//
// Contexts, as the real driver has them (issue 11): every context has an id (cuCtxGetId, unique for
// the process); cuCtxCreate makes a context and pushes it; cuCtxDestroy destroys it and every module
// loaded in it. A destroyed context's memory is reused by the next cuCtxCreate, so its CUcontext
// pointer comes back with a new id (as a real driver's may). A module belongs to the context that was
// current when it was loaded: cuLaunchKernel of a function fails with CUDA_ERROR_INVALID_HANDLE when
// another context is current (CUDA_ERROR_INVALID_CONTEXT when none is). A module or function of a
// destroyed context is never freed; any later use of it (unload, get function, launch) returns
// CUDA_ERROR_INVALID_HANDLE and counts as a stale use (where a real driver may crash):
// fakecuda_stale_uses().
//
// Code, parameters and variables (typed launches, globals): a module or library knows its kernels'
// parameters (offset and size, in order) from a real cubin's .nv.info.<kernel> EIATTR_KPARAM_INFO
// records, and from the PTX .param list for PTX and the fake JIT's cubins (which carry them in the
// same records); cuFuncGetParamInfo / cuKernelGetParamInfo answer from them (the latter only with a context
// current, CUDA_ERROR_INVALID_CONTEXT otherwise, as driver 580 does; CUDA_ERROR_INVALID_VALUE
// past the last one; FAKECUDA_MISSING=cuFuncGetParamInfo,cuKernelGetParamInfo takes them away, as a
// driver older than CUDA 12.4; asked for with a version before 12040 they are refused, as the real
// driver refuses them). Its __constant__/__device__ variables come from the cubin's
// STT_OBJECT symbols in .nv.constant*/.nv.global (size, initial bytes) or the PTX's .global/.const
// declarations; each module (a library: each context) has its own copy, which is the only fake
// device memory: cuModuleGetGlobal/cuLibraryGetGlobal give its address and size, cuMemcpyHtoD/DtoH
// copy within it (anything else, or no current context, is an error). cuLaunchKernel reads each
// kernel parameter from args[i] as the driver does (a null args with parameters is
// CUDA_ERROR_INVALID_VALUE) into a buffer laid out as the kernel's parameters.
//
// Libraries (cuLibraryLoadData) belong to no context; cuLibraryUnload marks one unloaded (never
// freed): a later unload, cuLibraryGetKernel, or launch of one of its kernels is
// CUDA_ERROR_INVALID_HANDLE and a stale use. fakecuda_live_libraries() counts those not unloaded.
//
// Introspection for in-process tests: fakecuda_jit_count(), fakecuda_module_loads(),
// fakecuda_live_modules(), fakecuda_live_libraries(), fakecuda_preserved_libraries() (loaded with
// CU_LIBRARY_BINARY_IS_PRESERVED: such an image is checked again at each lazy load into a context),
// fakecuda_primary_refcount(dev),
// fakecuda_launches(), fakecuda_stale_uses(), fakecuda_live_modules_in(ctx).
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#undef cuGetProcAddress

namespace {

// ---- configuration ------------------------------------------------------------------------------

struct isa {
  int major = 0, minor = 0;
  bool operator>(const isa& o) const { return major != o.major ? major > o.major : minor > o.minor; }
  std::string str() const { return std::to_string(major) + "." + std::to_string(minor); }
};

isa parse_isa(const char* s) {
  isa v;
  if (s) std::sscanf(s, "%d.%d", &v.major, &v.minor);
  return v;
}

isa isa_for_driver(int version) {
  int major = version / 1000, minor = (version % 1000) / 10;
  if (major >= 13) return {9, minor};
  if (major == 12) {
    if (minor <= 5) return {8, minor};
    return {8, minor - 1};  // 12.7 -> 8.6, 12.8 -> 8.7, 12.9 -> 8.8
  }
  if (major == 11) return {7, minor};
  return {6, 0};
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

struct static_config {
  std::vector<int> devices;
  int driver_version = 13000;
  bool integrated = false;
};

const static_config& cfg() {
  static const static_config c = [] {
    static_config c;
    const char* d = std::getenv("FAKECUDA_DEVICES");
    std::string list = d ? d : "90";
    std::size_t pos = 0;
    while (pos < list.size()) {
      std::size_t comma = list.find(',', pos);
      std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (!item.empty()) {
        int cc = 0;
        if (item.find('.') != std::string::npos) {
          int a = 0, b = 0;
          std::sscanf(item.c_str(), "%d.%d", &a, &b);
          cc = a * 10 + b;
        } else {
          cc = std::atoi(item.c_str());
        }
        if (cc > 0) c.devices.push_back(cc);
      }
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    if (*env("FAKECUDA_DRIVER_VERSION")) c.driver_version = std::atoi(env("FAKECUDA_DRIVER_VERSION"));
    c.integrated = std::strcmp(env("FAKECUDA_INTEGRATED"), "1") == 0;
    return c;
  }();
  return c;
}

isa max_isa() {
  const char* v = std::getenv("FAKECUDA_MAX_PTX_ISA");
  return v && *v ? parse_isa(v) : isa_for_driver(cfg().driver_version);
}

bool list_has(const char* list, const std::string& item) {
  std::string l = list;
  std::size_t pos = 0;
  while (pos <= l.size()) {
    std::size_t comma = l.find(',', pos);
    if (l.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos) == item) return true;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return false;
}

// ---- objects ------------------------------------------------------------------------------------

struct fake_ctx {
  int device = 0;
  int refcount = 0;              // primary contexts: retain count; created ones: 1 while alive
  bool primary = false;
  unsigned long long id = 0;     // cuCtxGetId; a new one each time the context is (re)created
};

// What a module's code declares: its kernels, each kernel's parameters (offset, size, in order) and
// its __constant__/__device__ variables (size, initial bytes).
struct kparam {
  std::size_t offset = 0, size = 0;
};
struct global_decl {
  std::string name;
  std::vector<std::uint8_t> init;  // its size in bytes, zeros where the image has no data
};
struct code_info {
  std::vector<std::string> kernels;
  std::map<std::string, std::vector<kparam>> params;
  std::vector<global_decl> globals;
};

struct fake_function;
struct fake_module {
  fake_ctx* ctx = nullptr;
  unsigned long long ctx_id = 0;  // the id of the context it was loaded in
  bool dead = false;              // its context was destroyed
  std::vector<std::string> kernels;
  std::map<std::string, fake_function*> functions;
  std::map<std::string, std::vector<kparam>> params;
  std::map<std::string, std::vector<std::uint8_t>> globals;  // device memory: CUdeviceptr = data()
};
struct fake_function {
  std::uint32_t magic = 0x46554e43;  // "FUNC": a CUfunction (a CUkernel passed to cuLaunchKernel has another)
  fake_module* module = nullptr;
  std::string name;
};
// Libraries (cuLibraryLoadData, CUDA 12.0): context-independent. A kernel's function in a context
// (cuKernelGetFunction) lives in a per-context module the library loads lazily, which dies with the
// context, as a module does.
struct fake_kernel;
struct fake_library {
  int sm = 0;                          // a cubin's SM; 0 for PTX (JIT-compiled for each device)
  bool arch_specific = false;
  code_info code;
  std::map<std::string, fake_kernel*> by_name;
  bool unloaded = false;               // by cuLibraryUnload; kept (never freed) to count stale uses
  std::map<std::pair<fake_ctx*, unsigned long long>, fake_module*> per_context;  // its module in a context
  // CU_LIBRARY_BINARY_IS_PRESERVED: the caller promised the image until cuLibraryUnload. The fake
  // reads it again (and compares a checksum) whenever it loads the library into a context, as a
  // driver that took the promise would: a freed or changed image is a stale use (and an ASan error).
  const std::uint8_t* preserved = nullptr;
  std::size_t preserved_size = 0;
  std::uint64_t preserved_sum = 0;
};
struct fake_kernel {
  std::uint32_t magic = 0x4b45524e;  // "KERN"
  fake_library* lib = nullptr;
  std::string name;
};

struct ptx_info;

struct fake_link {
  fake_ctx* ctx = nullptr;
  char* info = nullptr;
  std::size_t info_size = 0;
  char* err = nullptr;
  std::size_t err_size = 0;
  int target = 0;  // CU_JIT_TARGET value, 0: from the context
  std::string options;  // the JIT options given, as FAKECUDA_JIT_LOG writes them
  std::string name;                    // of the first input
  std::vector<ptx_info> inputs;        // checked at cuLinkAddData, linked at cuLinkComplete
  std::vector<std::uint64_t> hashes;
  int jit_target = 0;
  std::vector<std::uint8_t> cubin;
};

std::mutex g_mu;
bool g_initialized = false;
std::vector<fake_ctx> g_primary;  // one per device
std::vector<fake_ctx*> g_created;  // every context cuCtxCreate made (never freed; guarded by g_mu)
std::vector<fake_ctx*> g_free;     // destroyed ones, reused by the next cuCtxCreate (same pointer)
std::vector<fake_module*> g_modules;  // live modules (guarded by g_mu)
std::map<std::uintptr_t, std::size_t> g_regions;  // device memory (variables of live modules): start -> size
std::vector<std::uint8_t> g_last_params;          // the parameter bytes of the last launch (guarded by g_mu)
unsigned long long g_next_ctx_id = 1;  // guarded by g_mu
std::atomic<int> g_launches{0};
std::atomic<int> g_stale_uses{0};
std::atomic<int> g_jit_count{0};
std::atomic<int> g_module_loads{0};
std::atomic<int> g_live_modules{0};
std::atomic<int> g_live_libraries{0};
std::atomic<int> g_preserved_libraries{0};  // loaded with CU_LIBRARY_BINARY_IS_PRESERVED (ever)
thread_local std::vector<fake_ctx*> t_ctx_stack;

fake_ctx* current() { return t_ctx_stack.empty() ? nullptr : t_ctx_stack.back(); }

// Gives a module its code: kernels, parameters, and its own copy of each variable (device memory).
// Call with g_mu held.
void install_code(fake_module* mod, const code_info& code) {
  mod->kernels = code.kernels;
  mod->params = code.params;
  for (const auto& g : code.globals) {
    auto& bytes = mod->globals[g.name];
    bytes = g.init;
    if (bytes.empty()) bytes.resize(1);  // a distinct address even for an empty variable
    g_regions[reinterpret_cast<std::uintptr_t>(bytes.data())] = g.init.size();
  }
}

// A context is alive while its refcount is positive (a released primary context is inactive, a
// destroyed one has 0). Call with g_mu held.
bool alive(const fake_ctx* c) { return c && c->refcount > 0; }

bool is_live_module(const fake_module* m) {
  return std::find(g_modules.begin(), g_modules.end(), m) != g_modules.end();
}

void write_log(char* buf, std::size_t size, const std::string& text) {
  if (!buf || size == 0) return;
  std::size_t n = std::min(size - 1, text.size());
  std::memcpy(buf, text.data(), n);
  buf[n] = 0;
}

std::uint64_t fnv1a(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void record_jit(const char* how, int sm, bool arch_specific, std::uint64_t hash, const std::string& options,
                const std::string& name) {
  ++g_jit_count;
  const char* path = std::getenv("FAKECUDA_JIT_LOG");
  if (!path || !*path) return;
  char line[512];
  int n = std::snprintf(line, sizeof line, "%d %s sm_%d%s %016llx opts=%s %s\n", static_cast<int>(getpid()), how, sm,
                        arch_specific ? "a" : "", static_cast<unsigned long long>(hash),
                        options.empty() ? "-" : options.c_str(), name.c_str());
  int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  // One write() of a short line with O_APPEND: lines from concurrent processes do not interleave.
  ssize_t w = ::write(fd, line, static_cast<std::size_t>(std::min(n, static_cast<int>(sizeof line) - 1)));
  (void)w;
  ::close(fd);
}

// ---- PTX ----------------------------------------------------------------------------------------

struct ptx_info {
  bool ok = false;
  isa version;
  int target = 0;           // 80 for sm_80 / compute_80
  bool arch_specific = false;
  int version_line = 0;
  std::vector<std::string> entries;
  code_info code;  // entries, their .param lists, .global/.const variables
  std::vector<std::string> extern_funcs;   // `.extern .func ... name`: what another input must define
  std::vector<std::string> defined_funcs;  // `.func` / `.visible .func` / `.weak .func` with a body
};

// The name a `.func` declaration line declares: after ".func", an optional "(return params)", then
// the identifier (up to '(' , a blank or the end of the line).
std::string func_name(const std::string& t, std::size_t func_at) {
  std::size_t a = t.find_first_not_of(" \t", func_at + 5);
  if (a != std::string::npos && t[a] == '(') {
    std::size_t close = t.find(')', a);
    a = close == std::string::npos ? close : t.find_first_not_of(" \t", close + 1);
  }
  if (a == std::string::npos) return "";
  std::size_t b = t.find_first_of(" \t(;", a);
  return t.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

// Bytes of a PTX type: .u8 .b16 .s32 .f64 ... -> 1, 2, 4, 8 (.pred: 1).
std::size_t ptx_type_size(const std::string& t) {
  std::size_t i = 1;
  while (i < t.size() && !(t[i] >= '0' && t[i] <= '9')) ++i;
  const int bits = std::atoi(t.c_str() + i);
  return bits >= 8 ? static_cast<std::size_t>(bits / 8) : 1;
}

// One declaration's words: ".param .align 4 .b8 k_param_0[12]" or ".global .align 4 .u32 counter":
// its alignment, size and name (arrays: element size times count).
struct ptx_decl {
  std::size_t align = 0, size = 0;
  std::string name;
};
ptx_decl parse_decl(const std::string& text) {
  ptx_decl d;
  std::size_t elem = 0, count = 1;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t a = text.find_first_not_of(" \t\r\n,;", pos);
    if (a == std::string::npos) break;
    std::size_t b = text.find_first_of(" \t\r\n,;=", a);
    std::string w = text.substr(a, b == std::string::npos ? std::string::npos : b - a);
    pos = b == std::string::npos ? text.size() : b;
    if (w == "=") break;
    if (w == ".align") {
      std::size_t c = text.find_first_not_of(" \t", pos);
      d.align = static_cast<std::size_t>(std::atoi(text.c_str() + c));
      pos = text.find_first_of(" \t", c);
      if (pos == std::string::npos) pos = text.size();
    } else if (w.size() > 1 && w[0] == '.' &&
               (w[1] == 'b' || w[1] == 'u' || w[1] == 's' || w[1] == 'f' || w == ".pred") && w != ".shared") {
      elem = ptx_type_size(w);
    } else if (w[0] != '.') {
      std::size_t br = w.find('[');
      d.name = w.substr(0, br);
      if (br != std::string::npos) count = static_cast<std::size_t>(std::atoll(w.c_str() + br + 1));
      break;
    }
  }
  d.size = elem * count;
  if (!d.align) d.align = elem ? elem : 1;
  return d;
}

// The .param list of `.entry NAME(...)` starting at `open` (the '('): offsets as the driver lays
// them out (each parameter aligned to its alignment).
std::vector<kparam> parse_params(const std::string& text, std::size_t open) {
  std::vector<kparam> out;
  const std::size_t close = text.find(')', open);
  if (close == std::string::npos) return out;
  const std::string list = text.substr(open + 1, close - open - 1);
  std::size_t end = 0, pos = 0;
  while (pos < list.size()) {
    std::size_t at = list.find(".param", pos);
    if (at == std::string::npos) break;
    std::size_t next = list.find(".param", at + 6);
    ptx_decl d = parse_decl(list.substr(at + 6, next == std::string::npos ? std::string::npos : next - at - 6));
    kparam k;
    k.offset = (end + d.align - 1) / d.align * d.align;
    k.size = d.size;
    end = k.offset + k.size;
    out.push_back(k);
    pos = next == std::string::npos ? list.size() : next;
  }
  return out;
}

ptx_info parse_ptx(const std::uint8_t* p, std::size_t n) {
  ptx_info info;
  std::string text(reinterpret_cast<const char*>(p), strnlen(reinterpret_cast<const char*>(p), n));
  std::size_t pos = 0;
  int line_no = 0;
  bool have_version = false, have_target = false;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    ++line_no;
    std::size_t s = line.find_first_not_of(" \t");
    std::string t = s == std::string::npos ? "" : line.substr(s);
    if (t.rfind(".version", 0) == 0) {
      info.version = parse_isa(t.c_str() + 8);
      info.version_line = line_no;
      have_version = true;
    } else if (t.rfind(".target", 0) == 0) {
      const char* sm = std::strstr(t.c_str(), "sm_");
      if (sm) {
        info.target = std::atoi(sm + 3);
        const char* q = sm + 3;
        while (*q >= '0' && *q <= '9') ++q;
        info.arch_specific = *q == 'a';
        have_target = true;
      }
    } else if (t.rfind(".extern .func", 0) == 0) {
      std::string f = func_name(t, t.find(".func"));
      if (!f.empty()) info.extern_funcs.push_back(f);
    } else if (t.rfind(".func", 0) == 0 || t.rfind(".visible .func", 0) == 0 || t.rfind(".weak .func", 0) == 0) {
      std::string f = func_name(t, t.find(".func"));
      if (!f.empty()) info.defined_funcs.push_back(f);
    } else {
      std::size_t e = t.find(".entry");
      if (e != std::string::npos) {
        std::size_t a = t.find_first_not_of(" \t", e + 6);
        std::size_t b = a == std::string::npos ? a : t.find_first_of(" \t(", a);
        if (a != std::string::npos) {
          info.entries.push_back(t.substr(a, b == std::string::npos ? std::string::npos : b - a));
          std::size_t open = text.find('(', pos + s + a);
          if (open != std::string::npos) info.code.params[info.entries.back()] = parse_params(text, open);
        }
      } else {
        // Module-scope variables: [.visible|.extern|.weak] .global|.const ... NAME[N] [= {...}];
        std::string v = t;
        for (const char* prefix : {".visible ", ".extern ", ".weak "})
          if (v.rfind(prefix, 0) == 0) v = v.substr(std::strlen(prefix));
        if (v.rfind(".global ", 0) == 0 || v.rfind(".const ", 0) == 0) {
          ptx_decl d = parse_decl(v.substr(v.find(' ')));
          if (!d.name.empty()) info.code.globals.push_back({d.name, std::vector<std::uint8_t>(d.size, 0)});
        }
      }
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  info.ok = have_version && have_target;
  info.code.kernels = info.entries;
  return info;
}

// ---- ELF ------------------------------------------------------------------------------------------

template <class T>
void put(std::vector<std::uint8_t>& out, std::size_t off, T v) {
  std::memcpy(out.data() + off, &v, sizeof v);
}
template <class T>
T get(const std::uint8_t* p, std::size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

// A fake cubin: ELF64, e_machine 190 (EM_CUDA), SM in e_flags bits 8-15 (like nvcc's), sections
// .shstrtab .strtab .symtab .nv.compat .fakecuda .text.<kernel>... .nv.info.<kernel>... .nv.global,
// one global STT_FUNC per kernel (st_other 0x10, as nvcc marks entry functions), one STT_OBJECT per
// PTX .global/.const variable, the parameters in .nv.info.<kernel> as nvcc writes them.
std::vector<std::uint8_t> make_cubin(int sm, bool arch_specific, const code_info& code,
                                     std::uint64_t ptx_hash, const std::string& note) {
  const std::vector<std::string>& kernels = code.kernels;
  struct section {
    std::string name;
    std::uint32_t type;
    std::uint64_t flags;
    std::vector<std::uint8_t> data;
    std::uint32_t link = 0, info = 0;
    std::uint64_t entsize = 0, align = 1;
  };
  std::vector<section> secs;
  secs.push_back({"", 0, 0, {}});
  secs.push_back({".shstrtab", 3, 0, {}});
  secs.push_back({".strtab", 3, 0, {}});
  secs.push_back({".symtab", 2, 0, {}, 2, 1, 24, 8});
  std::vector<std::uint8_t> compat = {0x02, 0x09, static_cast<std::uint8_t>(arch_specific ? 1 : 0), 0x00, 0, 0, 0, 0};
  secs.push_back({".nv.compat", 0x70000086u, 0, compat, 0, 0, 0, 4});
  std::vector<std::uint8_t> notebytes(note.begin(), note.end());
  secs.push_back({".fakecuda", 1, 0, notebytes});
  const std::size_t first_text = secs.size();
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    std::vector<std::uint8_t> body(16);
    std::uint64_t h = ptx_hash ^ (0x9E3779B97F4A7C15ull * (i + 1));
    std::memcpy(body.data(), &h, 8);
    std::memcpy(body.data() + 8, &h, 8);
    secs.push_back({".text." + kernels[i], 1, 0x6 /* AX */, body, 3, 0, 0, 128});
  }
  // nvcc's parameter table: one EIATTR_KPARAM_INFO record per parameter in .nv.info.<kernel>
  // (format EIFMT_SVAL 0x04, attribute 0x17, 12 bytes: index u32, ordinal u16, offset u16, then a
  // u32 whose bits 18-31 hold the size), last parameter first as nvcc writes them.
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    std::vector<std::uint8_t> info;
    auto it = code.params.find(kernels[i]);
    if (it != code.params.end())
      for (std::size_t k = it->second.size(); k-- > 0;) {
        std::uint8_t rec[16] = {0x04, 0x17, 12, 0};
        const std::uint16_t ordinal = static_cast<std::uint16_t>(k), offset = static_cast<std::uint16_t>(it->second[k].offset);
        const std::uint32_t flags = (static_cast<std::uint32_t>(it->second[k].size) << 18) | 0x1f000u;
        std::memcpy(rec + 8, &ordinal, 2);
        std::memcpy(rec + 10, &offset, 2);
        std::memcpy(rec + 12, &flags, 4);
        info.insert(info.end(), rec, rec + 16);
      }
    secs.push_back({".nv.info." + kernels[i], 0x70000000u, 0, info, 3, static_cast<std::uint32_t>(first_text + i), 0, 4});
  }
  // Module-scope variables: STT_OBJECT symbols in a NOBITS .nv.global section (as nvcc's __device__).
  const std::size_t globals_section = secs.size();
  std::vector<std::uint64_t> global_offsets;
  std::uint64_t global_at = 0;
  for (const auto& g : code.globals) {
    global_offsets.push_back(global_at);
    global_at += (g.init.size() + 7) / 8 * 8;
  }
  secs.push_back({".nv.global", 8 /* NOBITS */, 0x3, {}, 0, 0, 0, 8});
  // String tables.
  std::vector<std::uint8_t>& shstr = secs[1].data;
  std::vector<std::uint32_t> name_off;
  shstr.push_back(0);
  for (auto& s : secs) {
    if (s.name.empty()) {
      name_off.push_back(0);
      continue;
    }
    name_off.push_back(static_cast<std::uint32_t>(shstr.size()));
    shstr.insert(shstr.end(), s.name.begin(), s.name.end());
    shstr.push_back(0);
  }
  std::vector<std::uint8_t>& str = secs[2].data;
  str.push_back(0);
  std::vector<std::uint8_t>& sym = secs[3].data;
  sym.assign(24, 0);  // null symbol
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    std::uint32_t off = static_cast<std::uint32_t>(str.size());
    str.insert(str.end(), kernels[i].begin(), kernels[i].end());
    str.push_back(0);
    std::vector<std::uint8_t> s(24, 0);
    std::memcpy(s.data(), &off, 4);
    s[4] = 0x12;  // STB_GLOBAL, STT_FUNC
    s[5] = 0x10;  // STO_CUDA_ENTRY
    std::uint16_t shndx = static_cast<std::uint16_t>(first_text + i);
    std::memcpy(s.data() + 6, &shndx, 2);
    std::uint64_t size = 16;
    std::memcpy(s.data() + 16, &size, 8);
    sym.insert(sym.end(), s.begin(), s.end());
  }
  for (std::size_t i = 0; i < code.globals.size(); ++i) {
    std::uint32_t off = static_cast<std::uint32_t>(str.size());
    str.insert(str.end(), code.globals[i].name.begin(), code.globals[i].name.end());
    str.push_back(0);
    std::vector<std::uint8_t> s(24, 0);
    std::memcpy(s.data(), &off, 4);
    s[4] = 0x11;  // STB_GLOBAL, STT_OBJECT
    std::uint16_t shndx = static_cast<std::uint16_t>(globals_section);
    std::memcpy(s.data() + 6, &shndx, 2);
    std::memcpy(s.data() + 8, &global_offsets[i], 8);
    std::uint64_t size = code.globals[i].init.size();
    std::memcpy(s.data() + 16, &size, 8);
    sym.insert(sym.end(), s.begin(), s.end());
  }
  // Layout: header, section data (aligned), section headers.
  std::vector<std::uint8_t> out(64, 0);
  std::vector<std::uint64_t> offsets(secs.size(), 0);
  for (std::size_t i = 1; i < secs.size(); ++i) {
    std::uint64_t a = secs[i].align ? secs[i].align : 1;
    while (out.size() % a) out.push_back(0);
    offsets[i] = out.size();
    out.insert(out.end(), secs[i].data.begin(), secs[i].data.end());
  }
  while (out.size() % 8) out.push_back(0);
  std::uint64_t shoff = out.size();
  out.resize(shoff + 64 * secs.size(), 0);
  for (std::size_t i = 1; i < secs.size(); ++i) {
    std::size_t h = shoff + 64 * i;
    put<std::uint32_t>(out, h + 0, name_off[i]);
    put<std::uint32_t>(out, h + 4, secs[i].type);
    put<std::uint64_t>(out, h + 8, secs[i].flags);
    put<std::uint64_t>(out, h + 24, offsets[i]);
    put<std::uint64_t>(out, h + 32, secs[i].data.size());
    put<std::uint32_t>(out, h + 40, secs[i].link);
    put<std::uint32_t>(out, h + 44, secs[i].info);
    put<std::uint64_t>(out, h + 48, secs[i].align);
    put<std::uint64_t>(out, h + 56, secs[i].entsize);
  }
  const std::uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x41, 8, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(out.data(), ident, 16);
  put<std::uint16_t>(out, 16, 2);    // ET_EXEC
  put<std::uint16_t>(out, 18, 190);  // EM_CUDA
  put<std::uint32_t>(out, 20, 1);
  std::uint32_t flags = 0x06000000u | (static_cast<std::uint32_t>(sm) << 8) | (sm >= 100 ? 0x02u : 0x04u);
  put<std::uint32_t>(out, 48, flags);
  put<std::uint64_t>(out, 40, shoff);
  put<std::uint16_t>(out, 52, 64);  // e_ehsize
  put<std::uint16_t>(out, 58, 64);  // e_shentsize
  put<std::uint16_t>(out, 60, static_cast<std::uint16_t>(secs.size()));
  put<std::uint16_t>(out, 62, 1);   // e_shstrndx
  return out;
}

struct cubin_info {
  bool ok = false;
  int sm = 0;
  bool arch_specific = false;
  bool from_fake_jit = false;
  int jit_driver = 0;  // the driver version the fake JIT that made it reported
  std::vector<std::string> kernels;
  code_info code;      // kernels, parameters (.nv.info.<kernel>), variables (STT_OBJECT symbols)
};

// Reads what the fake (and nvcc) put in a cubin, bounds-checked. `n` may be unknown (cuModuleLoadData
// gets no size): then the ELF's own section header table bounds it.
cubin_info parse_cubin(const std::uint8_t* p) {
  cubin_info info;
  if (!(p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') || p[4] != 2) return info;
  if (get<std::uint16_t>(p, 18) != 190) return info;
  std::uint32_t flags = get<std::uint32_t>(p, 48);
  info.sm = static_cast<int>((flags >> 8) & 0xff);
  std::uint64_t shoff = get<std::uint64_t>(p, 40);
  std::uint16_t shnum = get<std::uint16_t>(p, 60);
  std::uint16_t shstrndx = get<std::uint16_t>(p, 62);
  if (shnum == 0 || shnum > 4096 || shstrndx >= shnum) return info;
  auto sh = [&](std::size_t i) { return p + shoff + 64 * i; };
  const std::uint8_t* shstr = p + get<std::uint64_t>(sh(shstrndx), 24);
  for (std::size_t i = 1; i < shnum; ++i) {
    const char* name = reinterpret_cast<const char*>(shstr + get<std::uint32_t>(sh(i), 0));
    std::uint32_t type = get<std::uint32_t>(sh(i), 4);
    std::uint64_t off = get<std::uint64_t>(sh(i), 24);
    std::uint64_t size = get<std::uint64_t>(sh(i), 32);
    if (std::strcmp(name, ".nv.compat") == 0) {
      for (std::uint64_t k = 0; k + 4 <= size; k += 4) {
        const std::uint8_t* r = p + off + k;
        if (r[0] == 0x02 && r[1] == 0x09 && r[2] == 1) info.arch_specific = true;
        if (r[0] == 0) break;
      }
    } else if (std::strcmp(name, ".fakecuda") == 0) {
      info.from_fake_jit = true;
      const std::string note(reinterpret_cast<const char*>(p + off), static_cast<std::size_t>(size));
      if (auto at = note.find(" drv="); at != std::string::npos) info.jit_driver = std::atoi(note.c_str() + at + 5);
    } else if (std::strncmp(name, ".nv.info.", 9) == 0) {
      // EIATTR_KPARAM_INFO (0x17) records: ordinal, offset, size (see make_cubin).
      std::vector<kparam> ps;
      for (std::uint64_t k = 0; k + 4 <= size;) {
        const std::uint8_t* r = p + off + k;
        const std::uint8_t fmt = r[0], attr = r[1];
        std::uint64_t len = fmt == 0x04 ? 4 + get<std::uint16_t>(r, 2) : 4;
        if (k + len > size) break;
        if (fmt == 0x04 && attr == 0x17 && len >= 16) {
          const std::size_t ordinal = get<std::uint16_t>(r, 8);
          if (ordinal >= ps.size()) ps.resize(ordinal + 1);
          ps[ordinal].offset = get<std::uint16_t>(r, 10);
          ps[ordinal].size = get<std::uint32_t>(r, 12) >> 18;
        }
        k += len;
      }
      info.code.params[name + 9] = ps;
    } else if (type == 2 /* SHT_SYMTAB */) {
      std::uint32_t link = get<std::uint32_t>(sh(i), 40);
      if (link >= shnum) return info;
      const std::uint8_t* str = p + get<std::uint64_t>(sh(link), 24);
      for (std::uint64_t k = 24; k + 24 <= size; k += 24) {
        const std::uint8_t* s = p + off + k;
        const char* sym_name = reinterpret_cast<const char*>(str + get<std::uint32_t>(s, 0));
        // Entry functions, global or local (a kernel in an anonymous namespace or `static`: the
        // real driver finds those by name too).
        if ((s[4] & 0xf) == 2 /* STT_FUNC */ && (s[4] >> 4) <= 2 /* LOCAL, GLOBAL, WEAK (template instantiations) */ && (s[5] & 0x10))
          info.kernels.emplace_back(sym_name);
        const std::uint16_t shndx = get<std::uint16_t>(s, 6);
        if ((s[4] & 0xf) == 1 /* STT_OBJECT */ && shndx > 0 && shndx < shnum) {
          // __constant__ (.nv.constant3) and __device__ (.nv.global, NOBITS) variables, with their
          // initial bytes where the section has data.
          const char* in = reinterpret_cast<const char*>(shstr + get<std::uint32_t>(sh(shndx), 0));
          if (std::strncmp(in, ".nv.constant", 12) != 0 && std::strncmp(in, ".nv.global", 10) != 0) continue;
          global_decl g;
          g.name = sym_name;
          g.init.assign(static_cast<std::size_t>(get<std::uint64_t>(s, 16)), 0);
          const std::uint64_t value = get<std::uint64_t>(s, 8);
          if (get<std::uint32_t>(sh(shndx), 4) == 1 /* PROGBITS */ &&
              value + g.init.size() <= get<std::uint64_t>(sh(shndx), 32) && !g.init.empty())
            std::memcpy(g.init.data(), p + get<std::uint64_t>(sh(shndx), 24) + value, g.init.size());
          info.code.globals.push_back(std::move(g));
        }
      }
    }
  }
  info.code.kernels = info.kernels;
  info.ok = true;
  return info;
}

std::string sm_name(int sm, bool a) { return "sm_" + std::to_string(sm) + (a ? "a" : ""); }

// ---- the JIT ------------------------------------------------------------------------------------

// ptxas's checks, then a fake cubin. Returns the CUresult; fills log.
// The first extern function of `inputs` that none of them defines ("" when all are resolved).
std::string unresolved_extern(const std::vector<ptx_info>& inputs, std::string* in_input) {
  for (std::size_t i = 0; i < inputs.size(); ++i)
    for (const auto& ext : inputs[i].extern_funcs) {
      // The system calls nvcc declares in whole-program PTX (printf, device malloc/free, assert):
      // the JIT itself provides them.
      bool found = ext == "vprintf" || ext == "malloc" || ext == "free" || ext == "__assertfail";
      for (const auto& other : inputs)
        found = found || std::find(other.defined_funcs.begin(), other.defined_funcs.end(), ext) != other.defined_funcs.end();
      if (!found) {
        if (in_input) *in_input = std::to_string(i);
        return ext;
      }
    }
  return "";
}

// Checks one PTX input as ptxas would (header, ISA limit, target, FAKECUDA_FAIL_JIT) and takes the
// JIT's time; `pi` and `target` receive what was read. Code generation is fake_codegen's.
CUresult fake_check_ptx(const std::uint8_t* ptx, std::size_t n, int device_cc, int target_override, ptx_info& pi,
                        int& target, std::string& err_log) {
  pi = parse_ptx(ptx, n);
  if (!pi.ok) {
    err_log = "ptxas application ptx input, line 1; fatal : Parsing error: no .version/.target (fakecuda)";
    return CUDA_ERROR_INVALID_PTX;
  }
  isa limit = max_isa();
  if (pi.version > limit) {
    err_log = "ptxas application ptx input, line " + std::to_string(pi.version_line) + "; fatal : Unsupported .version " +
              pi.version.str() + "; current version is '" + limit.str() + "'";
    return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  }
  target = target_override ? target_override : device_cc;
  if (pi.target > target || (pi.arch_specific && pi.target != target) ||
      (target / 10 != pi.target / 10 && pi.target > target)) {
    err_log = "ptxas application ptx input: fatal : SM version specified by .target (" + sm_name(pi.target, pi.arch_specific) +
              ") is higher than the target (" + sm_name(target, false) + ") (fakecuda)";
    return CUDA_ERROR_INVALID_PTX;
  }
  if (std::strcmp(env("FAKECUDA_FAIL_JIT"), "1") == 0) {
    err_log = "ptxas fatal : fakecuda: FAKECUDA_FAIL_JIT=1";
    return CUDA_ERROR_INVALID_PTX;
  }
  int delay = std::atoi(env("FAKECUDA_JIT_DELAY_MS"));
  if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  return CUDA_SUCCESS;
}

// The fake cubin of checked inputs linked together (one input: the hash of its PTX, as before link
// groups; several: a hash over every input's hash), with every input's kernels, parameters and
// globals. Fails, as nvlink does, when an `.extern .func` of one input is defined by none.
CUresult fake_codegen(const std::vector<ptx_info>& inputs, const std::vector<std::uint64_t>& hashes, int target,
                      const std::string& name, const std::string& options, const char* how,
                      std::vector<std::uint8_t>& cubin, std::string& err_log, std::string& info_log) {
  std::string where;
  if (std::string ext = unresolved_extern(inputs, &where); !ext.empty()) {
    err_log = "nvlink error   : Undefined reference to '" + ext + "' in '" + name +
              (inputs.size() > 1 ? " input " + where : std::string()) + "' (fakecuda)";
    return CUDA_ERROR_INVALID_PTX;
  }
  std::uint64_t h = hashes.at(0);
  if (hashes.size() > 1) h = fnv1a(reinterpret_cast<const std::uint8_t*>(hashes.data()), hashes.size() * sizeof h);
  code_info code = inputs.at(0).code;
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const code_info& more = inputs[i].code;
    code.kernels.insert(code.kernels.end(), more.kernels.begin(), more.kernels.end());
    code.params.insert(more.params.begin(), more.params.end());
    code.globals.insert(code.globals.end(), more.globals.begin(), more.globals.end());
  }
  const ptx_info& pi = inputs.at(0);
  char note[224];
  std::snprintf(note, sizeof note, "fakecuda jit: ptx=%016llx isa=%s from=compute_%d to=%s drv=%d opts=%s",
                static_cast<unsigned long long>(h), pi.version.str().c_str(), pi.target,
                sm_name(target, pi.arch_specific).c_str(), cfg().driver_version, options.empty() ? "-" : options.c_str());
  cubin = make_cubin(target, pi.arch_specific, code, h, note);
  info_log = "ptxas info    : fakecuda compiled " + std::to_string(code.kernels.size()) + " entries of '" + name +
             "' for " + sm_name(target, pi.arch_specific);
  record_jit(how, target, pi.arch_specific, h, options, name);
  return CUDA_SUCCESS;
}

CUresult fake_jit(const std::uint8_t* ptx, std::size_t n, int device_cc, int target_override, const std::string& name,
                  const std::string& options, const char* how, std::vector<std::uint8_t>& cubin, std::string& err_log,
                  std::string& info_log) {
  ptx_info pi;
  int target = 0;
  if (CUresult r = fake_check_ptx(ptx, n, device_cc, target_override, pi, target, err_log); r != CUDA_SUCCESS) return r;
  return fake_codegen({pi}, {fnv1a(ptx, strnlen(reinterpret_cast<const char*>(ptx), n))}, target, name, options, how,
                      cubin, err_log, info_log);
}

// ---- entry points ---------------------------------------------------------------------------------

CUresult fk_cuInit(unsigned int) {
  int e = std::atoi(env("FAKECUDA_INIT_ERROR"));
  if (e) return static_cast<CUresult>(e);
  if (int delay = std::atoi(env("FAKECUDA_INIT_DELAY_MS")); delay > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    if (void* h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD)) dlclose(h);
  }
  if (cfg().devices.empty()) return CUDA_ERROR_NO_DEVICE;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_initialized) {
    g_primary.resize(cfg().devices.size());
    for (std::size_t i = 0; i < g_primary.size(); ++i) {
      g_primary[i].device = static_cast<int>(i);
      g_primary[i].primary = true;
    }
    g_initialized = true;
  }
  return CUDA_SUCCESS;
}

bool ready() { return g_initialized; }

CUresult fk_cuDriverGetVersion(int* v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = cfg().driver_version;
  return CUDA_SUCCESS;
}

struct err_name {
  CUresult r;
  const char* name;
  const char* text;
};
const err_name k_errs[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

CUresult fk_cuGetErrorName(CUresult r, const char** s) {
  for (const auto& e : k_errs)
    if (e.r == r) {
      *s = e.name;
      return CUDA_SUCCESS;
    }
  *s = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}
CUresult fk_cuGetErrorString(CUresult r, const char** s) {
  for (const auto& e : k_errs)
    if (e.r == r) {
      *s = e.text;
      return CUDA_SUCCESS;
    }
  *s = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult fk_cuDeviceGetCount(int* n) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  *n = static_cast<int>(cfg().devices.size());
  return CUDA_SUCCESS;
}
CUresult fk_cuDeviceGet(CUdevice* d, int ordinal) {
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= static_cast<int>(cfg().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
bool valid_dev(CUdevice d) { return ready() && d >= 0 && d < static_cast<int>(cfg().devices.size()); }

CUresult fk_cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  if (!valid_dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  int cc = cfg().devices[static_cast<std::size_t>(d)];
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = cc / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = cc % 10; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: *v = cfg().integrated ? 1 : 0; break;
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}
CUresult fk_cuDeviceGetName(char* name, int len, CUdevice d) {
  if (!valid_dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<std::size_t>(len), "FakeCUDA GPU %d (CC %d.%d)", d, cfg().devices[static_cast<std::size_t>(d)] / 10,
                cfg().devices[static_cast<std::size_t>(d)] % 10);
  return CUDA_SUCCESS;
}
CUresult fk_cuDeviceGetUuid(CUuuid* u, CUdevice d) {
  if (!valid_dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  for (int i = 0; i < 16; ++i) u->bytes[i] = static_cast<char>(0xf0 + d + i);
  return CUDA_SUCCESS;
}

CUresult fk_cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) {
  if (!valid_dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mu);
  auto& pc = g_primary[static_cast<std::size_t>(d)];
  if (pc.refcount == 0) pc.id = g_next_ctx_id++;  // (re)created: a new context
  ++pc.refcount;
  *c = reinterpret_cast<CUcontext>(&pc);
  return CUDA_SUCCESS;
}
CUresult fk_cuDevicePrimaryCtxRelease(CUdevice d) {
  if (!valid_dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mu);
  auto& pc = g_primary[static_cast<std::size_t>(d)];
  if (pc.refcount <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  --pc.refcount;
  return CUDA_SUCCESS;
}
CUresult fk_cuDevicePrimaryCtxGetState(CUdevice d, unsigned int* flags, int* active) {
  if (!valid_dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  *flags = 0;
  *active = g_primary[static_cast<std::size_t>(d)].refcount > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}
CUresult fk_cuCtxPushCurrent(CUcontext c) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  auto* fc = reinterpret_cast<fake_ctx*>(c);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!alive(fc)) return CUDA_ERROR_INVALID_CONTEXT;  // a released primary context, a destroyed one
  }
  t_ctx_stack.push_back(fc);
  return CUDA_SUCCESS;
}
CUresult fk_cuCtxPopCurrent(CUcontext* c) {
  if (t_ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (c) *c = reinterpret_cast<CUcontext>(t_ctx_stack.back());
  t_ctx_stack.pop_back();
  return CUDA_SUCCESS;
}
CUresult fk_cuCtxGetCurrent(CUcontext* c) {
  *c = reinterpret_cast<CUcontext>(current());
  return CUDA_SUCCESS;
}
CUresult fk_cuCtxGetDevice(CUdevice* d) {
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  *d = current()->device;
  return CUDA_SUCCESS;
}
CUresult fk_cuCtxSetCurrent(CUcontext c) {
  if (c) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!alive(reinterpret_cast<fake_ctx*>(c))) return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (!t_ctx_stack.empty()) t_ctx_stack.pop_back();
  if (c) t_ctx_stack.push_back(reinterpret_cast<fake_ctx*>(c));
  return CUDA_SUCCESS;
}
CUresult fk_cuCtxGetId(CUcontext c, unsigned long long* id) {
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  fake_ctx* fc = c ? reinterpret_cast<fake_ctx*>(c) : current();
  if (!fc) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!alive(fc)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *id = fc->id;
  return CUDA_SUCCESS;
}
// The CUDA 12.0 ABI's cuCtxCreate (cuCtxCreate_v2): creates a context and pushes it.
CUresult fk_cuCtxCreate(CUcontext* out, unsigned int, CUdevice d) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  fake_ctx* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_free.empty()) {
      c = g_free.back();  // the memory of a destroyed context: the same CUcontext value again
      g_free.pop_back();
    } else {
      c = new fake_ctx();
      g_created.push_back(c);
    }
    c->device = d;
    c->primary = false;
    c->refcount = 1;
    c->id = g_next_ctx_id++;
  }
  t_ctx_stack.push_back(c);
  *out = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}
// The CUDA 13.0 ABI's cuCtxCreate (cuCtxCreate_v4, what cuGetProcAddress gives for 13000 and later;
// the real driver gives neither _v2 nor _v4 for 12000, see context_test.cpp): the same, with
// creation parameters that the fake does not model.
CUresult fk_cuCtxCreate_v4(CUcontext* out, CUctxCreateParams* params, unsigned int flags, CUdevice d) {
  if (params) return CUDA_ERROR_NOT_SUPPORTED;
  return fk_cuCtxCreate(out, flags, d);
}
// Destroys a created context and every module loaded in it; pops it when it is current here.
CUresult fk_cuCtxDestroy(CUcontext c) {
  auto* fc = reinterpret_cast<fake_ctx*>(c);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!fc || fc->primary || !alive(fc)) return CUDA_ERROR_INVALID_CONTEXT;
    fc->refcount = 0;
    for (auto it = g_modules.begin(); it != g_modules.end();) {
      if ((*it)->ctx == fc) {
        (*it)->dead = true;  // kept (never freed) so that a stale use is counted, not a crash
        for (auto& g : (*it)->globals) g_regions.erase(reinterpret_cast<std::uintptr_t>(g.second.data()));
        --g_live_modules;
        it = g_modules.erase(it);
      } else {
        ++it;
      }
    }
    g_free.push_back(fc);
  }
  t_ctx_stack.erase(std::remove(t_ctx_stack.begin(), t_ctx_stack.end(), fc), t_ctx_stack.end());
  return CUDA_SUCCESS;
}
CUresult fk_cuCtxSynchronize() { return current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }

thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
CUresult fk_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, t_capture_mode);
  return CUDA_SUCCESS;
}

CUresult fk_cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned int n, CUjit_option* keys, void** vals) {
  fake_ctx* ctx = current();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (*env("FAKECUDA_CAPTURING") == '1' && t_capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (const char* le = env("FAKECUDA_LOAD_ERROR"); *le) {
    static std::atomic<int> good{0};
    const char* colon = std::strchr(le, ':');
    if (good.load() >= (colon ? std::atoi(colon + 1) : 0)) return static_cast<CUresult>(std::atoi(le));
    ++good;
  }
  if (!image || !m) return CUDA_ERROR_INVALID_VALUE;
  char* err = nullptr;
  std::size_t err_size = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (keys[i] == CU_JIT_ERROR_LOG_BUFFER) err = static_cast<char*>(vals[i]);
    if (keys[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) err_size = reinterpret_cast<std::uintptr_t>(vals[i]);
  }
  const auto* p = static_cast<const std::uint8_t*>(image);
  int cc = cfg().devices[static_cast<std::size_t>(ctx->device)];
  const char* fail = env("FAKECUDA_FAIL_LOAD");
  code_info code;
  if (p[0] == 0x7f && p[1] == 'E') {
    cubin_info ci = parse_cubin(p);
    if (!ci.ok) return CUDA_ERROR_INVALID_IMAGE;
    std::string name = sm_name(ci.sm, ci.arch_specific);
    // "sm_90" / "sass" name SASS shipped in a package; "jit" names cubins the fake JIT made.
    if (list_has(fail, "all") || (!ci.from_fake_jit && (list_has(fail, "sass") || list_has(fail, name))) ||
        (ci.from_fake_jit && list_has(fail, "jit")) ||
        (ci.from_fake_jit && list_has(fail, "jit-other-driver") && ci.jit_driver != cfg().driver_version)) {
      write_log(err, err_size, "fakecuda: FAKECUDA_FAIL_LOAD refuses " + name);
      return CUDA_ERROR_INVALID_IMAGE;
    }
    bool fits = ci.arch_specific ? ci.sm == cc : (ci.sm / 10 == cc / 10 && ci.sm % 10 <= cc % 10);
    if (!fits) {
      write_log(err, err_size, "fakecuda: " + name + " SASS cannot run on CC " + std::to_string(cc / 10) + "." +
                                   std::to_string(cc % 10));
      return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    code = std::move(ci.code);
  } else if (std::strstr(static_cast<const char*>(image), ".version")) {
    if (list_has(fail, "all") || list_has(fail, "ptx")) return CUDA_ERROR_INVALID_IMAGE;
    std::vector<std::uint8_t> cubin;
    std::string elog, ilog;
    std::size_t len = std::strlen(static_cast<const char*>(image)) + 1;
    CUresult r = fake_jit(p, len, cc, 0, "module", "", "module-load", cubin, elog, ilog);
    if (r != CUDA_SUCCESS) {
      write_log(err, err_size, elog);
      return r;
    }
    code = parse_cubin(cubin.data()).code;
  } else {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  auto* mod = new fake_module();
  mod->ctx = ctx;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!alive(ctx)) {
      delete mod;
      return CUDA_ERROR_INVALID_CONTEXT;
    }
    mod->ctx_id = ctx->id;
    install_code(mod, code);
    g_modules.push_back(mod);
  }
  ++g_module_loads;
  ++g_live_modules;
  *m = reinterpret_cast<CUmodule>(mod);
  return CUDA_SUCCESS;
}

CUresult fk_cuModuleUnload(CUmodule m) {
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  auto* mod = reinterpret_cast<fake_module*>(m);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!is_live_module(mod)) {
      ++g_stale_uses;  // unloading a module of a destroyed context (or twice)
      return CUDA_ERROR_INVALID_HANDLE;
    }
    g_modules.erase(std::find(g_modules.begin(), g_modules.end(), mod));
    for (auto& g : mod->globals) g_regions.erase(reinterpret_cast<std::uintptr_t>(g.second.data()));
  }
  for (auto& f : mod->functions) delete f.second;
  delete mod;
  --g_live_modules;
  return CUDA_SUCCESS;
}

CUresult fk_cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  if (!m || !name || !f) return CUDA_ERROR_INVALID_VALUE;
  auto* mod = reinterpret_cast<fake_module*>(m);
  std::lock_guard<std::mutex> lock(g_mu);
  if (!is_live_module(mod)) {
    ++g_stale_uses;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (std::find(mod->kernels.begin(), mod->kernels.end(), name) == mod->kernels.end()) return CUDA_ERROR_NOT_FOUND;
  auto& slot = mod->functions[name];
  if (!slot) slot = new fake_function{0x46554e43, mod, name};
  *f = reinterpret_cast<CUfunction>(slot);
  return CUDA_SUCCESS;
}

CUresult fk_cuLinkCreate(unsigned int n, CUjit_option* keys, void** vals, CUlinkState* out) {
  fake_ctx* ctx = current();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  auto* l = new fake_link();
  l->ctx = ctx;
  int opt_level = -1, max_regs = -1;
  bool line_info = false, debug_info = false;
  for (unsigned i = 0; i < n; ++i) {
    auto v = reinterpret_cast<std::uintptr_t>(vals[i]);
    switch (keys[i]) {
      case CU_JIT_OPTIMIZATION_LEVEL: opt_level = static_cast<int>(std::min<std::uintptr_t>(v, 1000)); break;
      case CU_JIT_MAX_REGISTERS: max_regs = static_cast<int>(std::min<std::uintptr_t>(v, 100000)); break;
      case CU_JIT_GENERATE_LINE_INFO: line_info = v != 0; break;
      case CU_JIT_GENERATE_DEBUG_INFO: debug_info = v != 0; break;
      case CU_JIT_INFO_LOG_BUFFER: l->info = static_cast<char*>(vals[i]); break;
      case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: l->info_size = v; break;
      case CU_JIT_ERROR_LOG_BUFFER: l->err = static_cast<char*>(vals[i]); break;
      case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: l->err_size = v; break;
      case CU_JIT_TARGET: l->target = static_cast<int>(v & 0xffff); break;
      default: break;
    }
  }
  if (opt_level > 4 || max_regs == 0 || max_regs > 255) {
    delete l;
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto add = [&](const std::string& o) { l->options += (l->options.empty() ? "" : ",") + o; };
  if (opt_level >= 0) add("O" + std::to_string(opt_level));
  if (max_regs > 0) add("maxrregcount=" + std::to_string(max_regs));
  if (line_info) add("lineinfo");
  if (debug_info) add("debug");
  *out = reinterpret_cast<CUlinkState>(l);
  return CUDA_SUCCESS;
}

CUresult fk_cuLinkAddData(CUlinkState s, CUjitInputType type, void* data, size_t size, const char* name, unsigned int,
                          CUjit_option*, void**) {
  auto* l = reinterpret_cast<fake_link*>(s);
  if (!l || !data) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_JIT_INPUT_PTX) return CUDA_ERROR_INVALID_VALUE;
  const auto* p = static_cast<const std::uint8_t*>(data);
  if (size == 0 || p[size - 1] != 0) {
    write_log(l->err, l->err_size, "fakecuda: PTX passed to cuLinkAddData is not NUL-terminated");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (l->inputs.empty()) l->name = name ? name : "";
  int cc = cfg().devices[static_cast<std::size_t>(l->ctx->device)];
  std::string elog;
  ptx_info pi;
  CUresult r = fake_check_ptx(p, size, cc, l->target, pi, l->jit_target, elog);
  if (r != CUDA_SUCCESS) {
    write_log(l->err, l->err_size, elog);
    return r;
  }
  l->inputs.push_back(std::move(pi));
  l->hashes.push_back(fnv1a(p, strnlen(reinterpret_cast<const char*>(p), size)));
  return CUDA_SUCCESS;
}

CUresult fk_cuLinkComplete(CUlinkState s, void** cubin, size_t* size) {
  auto* l = reinterpret_cast<fake_link*>(s);
  if (!l || l->inputs.empty() || !cubin || !size) return CUDA_ERROR_INVALID_VALUE;
  std::string elog, ilog;
  CUresult r = fake_codegen(l->inputs, l->hashes, l->jit_target, l->name, l->options, "culink", l->cubin, elog, ilog);
  if (r != CUDA_SUCCESS) {
    write_log(l->err, l->err_size, elog);
    return r;
  }
  write_log(l->info, l->info_size, ilog);
  *cubin = l->cubin.data();
  *size = l->cubin.size();
  return CUDA_SUCCESS;
}

CUresult fk_cuLinkDestroy(CUlinkState s) {
  delete reinterpret_cast<fake_link*>(s);
  return CUDA_SUCCESS;
}

bool fits(int sm, bool arch_specific, int cc) {
  return arch_specific ? sm == cc : (sm / 10 == cc / 10 && sm % 10 <= cc % 10);
}

// FNV-1a over 8-byte words of a preserved image (the fake's own check; any checksum would do, and
// a cheap one keeps the fake's load cost near nothing for the benchmarks that run on it).
std::uint64_t image_sum(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) h = (h ^ get<std::uint64_t>(p, i)) * 1099511628211ull;
  for (; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
// The bytes of an image the fake knows the end of: a cubin up to the end of its section header
// table, PTX up to its NUL.
std::size_t image_extent(const std::uint8_t* p) {
  if (p[0] == 0x7f && p[1] == 'E') return static_cast<std::size_t>(get<std::uint64_t>(p, 40) + 64u * get<std::uint16_t>(p, 60));
  return std::strlen(reinterpret_cast<const char*>(p)) + 1;
}

CUresult fk_cuLibraryLoadData(CUlibrary* out, const void* image, CUjit_option*, void**, unsigned int,
                              CUlibraryOption* lib_keys, void**, unsigned int lib_count) {
  if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
  bool preserve = false;
  for (unsigned i = 0; i < lib_count && lib_keys; ++i) preserve = preserve || lib_keys[i] == CU_LIBRARY_BINARY_IS_PRESERVED;
  if (!ready()) return CUDA_ERROR_NOT_INITIALIZED;
  const auto* p = static_cast<const std::uint8_t*>(image);
  auto* lib = new fake_library();
  if (p[0] == 0x7f && p[1] == 'E') {
    cubin_info ci = parse_cubin(p);
    if (!ci.ok) {
      delete lib;
      return CUDA_ERROR_INVALID_IMAGE;
    }
    // The real driver loads a library for every device it can run on; none at all is an error.
    bool any = false;
    for (int cc : cfg().devices) any = any || fits(ci.sm, ci.arch_specific, cc);
    if (!any) {
      delete lib;
      return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    lib->sm = ci.sm;
    lib->arch_specific = ci.arch_specific;
    lib->code = std::move(ci.code);
  } else if (std::strstr(static_cast<const char*>(image), ".version")) {
    std::size_t len = std::strlen(static_cast<const char*>(image)) + 1;
    lib->code = parse_ptx(p, len).code;
  } else {
    delete lib;
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (preserve) {
    lib->preserved = p;
    lib->preserved_size = image_extent(p);
    lib->preserved_sum = image_sum(p, lib->preserved_size);
    ++g_preserved_libraries;
  }
  ++g_live_libraries;
  *out = reinterpret_cast<CUlibrary>(lib);
  return CUDA_SUCCESS;
}
// Marks the library unloaded. Kept (never freed): its functions' modules go as modules do, and any
// later use of the library or its kernels is INVALID_HANDLE and a stale use.
CUresult fk_cuLibraryUnload(CUlibrary l) {
  if (!l) return CUDA_ERROR_INVALID_HANDLE;
  auto* lib = reinterpret_cast<fake_library*>(l);
  std::lock_guard<std::mutex> lock(g_mu);
  if (lib->unloaded) {
    ++g_stale_uses;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  lib->unloaded = true;
  --g_live_libraries;
  return CUDA_SUCCESS;
}
CUresult fk_cuLibraryGetKernel(CUkernel* k, CUlibrary l, const char* name) {
  if (!k || !l || !name) return CUDA_ERROR_INVALID_VALUE;
  auto* lib = reinterpret_cast<fake_library*>(l);
  std::lock_guard<std::mutex> lock(g_mu);
  if (lib->unloaded) {
    ++g_stale_uses;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (std::find(lib->code.kernels.begin(), lib->code.kernels.end(), name) == lib->code.kernels.end())
    return CUDA_ERROR_NOT_FOUND;
  auto& slot = lib->by_name[name];
  if (!slot) {
    slot = new fake_kernel();
    slot->lib = lib;
    slot->name = name;
  }
  *k = reinterpret_cast<CUkernel>(slot);
  return CUDA_SUCCESS;
}
// The library's module in the current context, loaded there on first use. Call with g_mu held.
CUresult library_module(fake_library* lib, fake_module** out) {
  fake_ctx* ctx = current();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (!alive(ctx)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (lib->unloaded) {
    ++g_stale_uses;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const int cc = cfg().devices[static_cast<std::size_t>(ctx->device)];
  if (lib->sm && !fits(lib->sm, lib->arch_specific, cc)) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  auto& mod = lib->per_context[{ctx, ctx->id}];
  if (!mod && lib->preserved && image_sum(lib->preserved, lib->preserved_size) != lib->preserved_sum) {
    ++g_stale_uses;  // the image the caller promised to keep was freed or changed
    return CUDA_ERROR_INVALID_IMAGE;
  }
  if (!mod) {
    mod = new fake_module();
    mod->ctx = ctx;
    mod->ctx_id = ctx->id;
    install_code(mod, lib->code);
    g_modules.push_back(mod);
    ++g_live_modules;
  }
  *out = mod;
  return CUDA_SUCCESS;
}
// The kernel's function in the current context.
CUresult kernel_function(fake_kernel* k, fake_function** out) {
  std::lock_guard<std::mutex> lock(g_mu);
  fake_module* mod = nullptr;
  if (CUresult r = library_module(k->lib, &mod); r != CUDA_SUCCESS) return r;
  auto& f = mod->functions[k->name];
  if (!f) {
    f = new fake_function();
    f->module = mod;
    f->name = k->name;
  }
  *out = f;
  return CUDA_SUCCESS;
}
CUresult fk_cuKernelGetFunction(CUfunction* out, CUkernel k) {
  if (!out || !k) return CUDA_ERROR_INVALID_VALUE;
  fake_function* f = nullptr;
  CUresult r = kernel_function(reinterpret_cast<fake_kernel*>(k), &f);
  if (r == CUDA_SUCCESS) *out = reinterpret_cast<CUfunction>(f);
  return r;
}

// Checks what the real driver checks of a launch (a current context, the function's module loaded in
// it) and runs nothing.
CUresult fk_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                           unsigned int by, unsigned int bz, unsigned int, CUstream, void** args, void** extra) {
  if (!f) return CUDA_ERROR_INVALID_VALUE;
  fake_ctx* ctx = current();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  auto* fn = reinterpret_cast<fake_function*>(f);
  if (fn->magic == 0x4b45524e) {  // a CUkernel: its function in the current context (as the driver does)
    fake_function* kf = nullptr;
    if (CUresult r = kernel_function(reinterpret_cast<fake_kernel*>(f), &kf); r != CUDA_SUCCESS) return r;
    fn = kf;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  if (!alive(ctx)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (fn->module->dead) {
    ++g_stale_uses;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (fn->module->ctx != ctx || fn->module->ctx_id != ctx->id) return CUDA_ERROR_INVALID_HANDLE;
  if (!gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
  // The parameter bytes, read the way the driver reads them: args[i] points to parameter i's bytes,
  // copied to its offset. Kept for fakecuda_last_launch_params().
  const auto it = fn->module->params.find(fn->name);
  if (it != fn->module->params.end() && !it->second.empty()) {
    if (!args && !extra) return CUDA_ERROR_INVALID_VALUE;
    if (args) {
      const kparam& last = it->second.back();
      g_last_params.assign(last.offset + last.size, 0);
      for (std::size_t i = 0; i < it->second.size(); ++i) {
        if (!args[i]) return CUDA_ERROR_INVALID_VALUE;
        std::memcpy(g_last_params.data() + it->second[i].offset, args[i], it->second[i].size);
      }
    }
  } else {
    g_last_params.clear();
  }
  ++g_launches;
  return CUDA_SUCCESS;
}

// cuFuncGetParamInfo / cuKernelGetParamInfo (CUDA 12.4): a parameter's offset and size, from the
// code's .nv.info (real cubins) or the PTX .param list (the fake JIT's cubins); CUDA_ERROR_INVALID_VALUE
// past the last one.
CUresult param_info(const std::vector<kparam>* ps, size_t index, size_t* offset, size_t* size) {
  if (!ps || !offset || index >= ps->size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = (*ps)[index].offset;
  if (size) *size = (*ps)[index].size;
  return CUDA_SUCCESS;
}
CUresult fk_cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset, size_t* size) {
  if (!f) return CUDA_ERROR_INVALID_VALUE;
  auto* fn = reinterpret_cast<fake_function*>(f);
  std::lock_guard<std::mutex> lock(g_mu);
  if (fn->magic != 0x46554e43) return CUDA_ERROR_INVALID_HANDLE;
  if (fn->module->dead) {
    ++g_stale_uses;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  auto it = fn->module->params.find(fn->name);
  return param_info(it == fn->module->params.end() ? nullptr : &it->second, index, offset, size);
}
CUresult fk_cuKernelGetParamInfo(CUkernel k, size_t index, size_t* offset, size_t* size) {
  if (!k) return CUDA_ERROR_INVALID_VALUE;
  // As driver 580 does: a library's kernel is answered for only with a context current.
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  auto* kn = reinterpret_cast<fake_kernel*>(k);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = kn->lib->code.params.find(kn->name);
  return param_info(it == kn->lib->code.params.end() ? nullptr : &it->second, index, offset, size);
}

// Variables: cuModuleGetGlobal, cuLibraryGetGlobal (the library's module in the current context).
CUresult global_of(fake_module* mod, const char* name, CUdeviceptr* ptr, size_t* bytes) {
  auto it = mod->globals.find(name);
  if (it == mod->globals.end()) return CUDA_ERROR_NOT_FOUND;
  if (ptr) *ptr = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(it->second.data()));
  if (bytes) *bytes = it->second.size();
  return CUDA_SUCCESS;
}
CUresult fk_cuModuleGetGlobal(CUdeviceptr* ptr, size_t* bytes, CUmodule m, const char* name) {
  if (!m || !name) return CUDA_ERROR_INVALID_VALUE;
  auto* mod = reinterpret_cast<fake_module*>(m);
  std::lock_guard<std::mutex> lock(g_mu);
  if (!is_live_module(mod)) {
    ++g_stale_uses;
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return global_of(mod, name, ptr, bytes);
}
CUresult fk_cuLibraryGetGlobal(CUdeviceptr* ptr, size_t* bytes, CUlibrary l, const char* name) {
  if (!l || !name) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  fake_module* mod = nullptr;
  if (CUresult r = library_module(reinterpret_cast<fake_library*>(l), &mod); r != CUDA_SUCCESS) return r;
  return global_of(mod, name, ptr, bytes);
}

// Copies to and from device memory: only inside a variable of a live module (the fake has no other
// device memory), with a context current, as the real driver wants one.
CUresult device_range(CUdeviceptr p, size_t n, std::uint8_t** out) {
  if (!current()) return CUDA_ERROR_INVALID_CONTEXT;
  const auto a = static_cast<std::uintptr_t>(p);
  auto it = g_regions.upper_bound(a);
  if (it == g_regions.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (a + n < a || a + n > it->first + it->second) return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<std::uint8_t*>(a);
  return CUDA_SUCCESS;
}
CUresult fk_cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::uint8_t* d = nullptr;
  if (CUresult r = device_range(dst, n, &d); r != CUDA_SUCCESS) return r;
  if (n) std::memcpy(d, src, n);
  return CUDA_SUCCESS;
}
CUresult fk_cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::uint8_t* s = nullptr;
  if (CUresult r = device_range(src, n, &s); r != CUDA_SUCCESS) return r;
  if (n) std::memcpy(dst, s, n);
  return CUDA_SUCCESS;
}

struct proc {
  const char* name;
  void* fn;
};
// What a benchmark's "driver" case calls (fatpack itself always uses the Ex form).
CUresult fk_cuModuleLoadData(CUmodule* m, const void* image) { return fk_cuModuleLoadDataEx(m, image, 0, nullptr, nullptr); }

#define FK(n) {#n, reinterpret_cast<void*>(&fk_##n)}
const proc k_procs[] = {
    FK(cuInit), FK(cuDriverGetVersion), FK(cuGetErrorName), FK(cuGetErrorString), FK(cuDeviceGetCount),
    FK(cuDeviceGet), FK(cuDeviceGetAttribute), FK(cuDeviceGetName), FK(cuDeviceGetUuid),
    FK(cuDevicePrimaryCtxRetain), FK(cuDevicePrimaryCtxRelease), FK(cuDevicePrimaryCtxGetState), FK(cuCtxPushCurrent), FK(cuCtxPopCurrent),
    FK(cuCtxGetCurrent), FK(cuCtxGetDevice), FK(cuCtxSetCurrent), FK(cuModuleLoadDataEx), FK(cuModuleLoadData), FK(cuModuleUnload),
    FK(cuModuleGetFunction), FK(cuLinkCreate), FK(cuLinkAddData), FK(cuLinkComplete), FK(cuLinkDestroy),
    FK(cuCtxGetId), FK(cuCtxCreate), FK(cuCtxDestroy), FK(cuCtxSynchronize), FK(cuLaunchKernel),
    FK(cuLibraryLoadData), FK(cuLibraryUnload), FK(cuLibraryGetKernel), FK(cuKernelGetFunction),
    FK(cuFuncGetParamInfo), FK(cuKernelGetParamInfo), FK(cuModuleGetGlobal), FK(cuLibraryGetGlobal),
    FK(cuMemcpyHtoD), FK(cuMemcpyDtoH), FK(cuThreadExchangeStreamCaptureMode),
};
#undef FK

// Entry points newer than CUDA 12.0, with the version that introduced them: as the real driver,
// cuGetProcAddress refuses them (CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) when asked for with an
// older version.
struct introduced {
  const char* name;
  int version;
};
const introduced k_introduced[] = {{"cuFuncGetParamInfo", 12040}, {"cuKernelGetParamInfo", 12040}};

CUresult lookup(const char* symbol, void** pfn, int version, CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  bool too_new = false;
  for (const auto& i : k_introduced) too_new = too_new || (std::strcmp(i.name, symbol) == 0 && version < i.version);
  if (version > cfg().driver_version || too_new) {
    if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (!list_has(env("FAKECUDA_MISSING"), symbol)) {
    if (version >= 13000 && std::strcmp(symbol, "cuCtxCreate") == 0) {  // the ABI changed in CUDA 13.0
      *pfn = reinterpret_cast<void*>(&fk_cuCtxCreate_v4);
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
    for (const auto& p : k_procs)
      if (std::strcmp(p.name, symbol) == 0) {
        *pfn = p.fn;
        if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
      }
  }
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                                                    cuuint64_t, CUdriverProcAddressQueryResult* status) {
  return lookup(symbol, pfn, version, status);
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress(const char* symbol, void** pfn, int version,
                                                                 cuuint64_t) {
  return lookup(symbol, pfn, version, nullptr);
}

__attribute__((visibility("default"))) CUresult cuDriverGetVersion(int* v) { return fk_cuDriverGetVersion(v); }

// The driver API under cuda.h's own names (for CUDA 13.0: the versioned names its macros choose), so
// that a program linked against libcuda (the toolkit's stub at link time) runs against the fake: put
// a directory with a libcuda.so.1 link to this library on LD_LIBRARY_PATH; fatpack's dlopen of
// libcuda.so.1 then finds the same library (samples/driver_api_port). Only what such programs call
// before their kernels run; device memory is not modelled (cuMemAlloc & co.: CUDA_ERROR_NOT_SUPPORTED).
#define FAKECUDA_EXPORT __attribute__((visibility("default")))
FAKECUDA_EXPORT CUresult cuInit(unsigned int flags) { return fk_cuInit(flags); }
FAKECUDA_EXPORT CUresult cuGetErrorName(CUresult r, const char** s) { return fk_cuGetErrorName(r, s); }
FAKECUDA_EXPORT CUresult cuGetErrorString(CUresult r, const char** s) { return fk_cuGetErrorString(r, s); }
FAKECUDA_EXPORT CUresult cuDeviceGetCount(int* n) { return fk_cuDeviceGetCount(n); }
FAKECUDA_EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) { return fk_cuDeviceGet(d, ordinal); }
FAKECUDA_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice d) { return fk_cuDeviceGetName(name, len, d); }
FAKECUDA_EXPORT CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  return fk_cuDeviceGetAttribute(v, a, d);
}
FAKECUDA_EXPORT CUresult cuCtxCreate_v4(CUcontext* c, CUctxCreateParams* p, unsigned int flags, CUdevice d) {
  return fk_cuCtxCreate_v4(c, p, flags, d);
}
FAKECUDA_EXPORT CUresult cuCtxDestroy_v2(CUcontext c) { return fk_cuCtxDestroy(c); }
FAKECUDA_EXPORT CUresult cuCtxSynchronize(void) { return fk_cuCtxSynchronize(); }
FAKECUDA_EXPORT CUresult cuModuleLoadData(CUmodule* m, const void* image) { return fk_cuModuleLoadData(m, image); }
FAKECUDA_EXPORT CUresult cuModuleUnload(CUmodule m) { return fk_cuModuleUnload(m); }
FAKECUDA_EXPORT CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  return fk_cuModuleGetFunction(f, m, name);
}
FAKECUDA_EXPORT CUresult cuLibraryGetKernel(CUkernel* k, CUlibrary l, const char* name) {
  return fk_cuLibraryGetKernel(k, l, name);
}
FAKECUDA_EXPORT CUresult cuKernelGetFunction(CUfunction* f, CUkernel k) { return fk_cuKernelGetFunction(f, k); }
FAKECUDA_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                        unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void** params,
                                        void** extra) {
  return fk_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
}
FAKECUDA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr*, size_t) { return CUDA_ERROR_NOT_SUPPORTED; }
FAKECUDA_EXPORT CUresult cuMemFree_v2(CUdeviceptr) { return CUDA_ERROR_NOT_SUPPORTED; }
FAKECUDA_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void*, size_t) { return CUDA_ERROR_NOT_SUPPORTED; }
FAKECUDA_EXPORT CUresult cuMemcpyDtoH_v2(void*, CUdeviceptr, size_t) { return CUDA_ERROR_NOT_SUPPORTED; }
#undef FAKECUDA_EXPORT

__attribute__((visibility("default"))) int fakecuda_jit_count(void) { return g_jit_count.load(); }
__attribute__((visibility("default"))) int fakecuda_module_loads(void) { return g_module_loads.load(); }
__attribute__((visibility("default"))) int fakecuda_live_modules(void) { return g_live_modules.load(); }
__attribute__((visibility("default"))) int fakecuda_live_libraries(void) { return g_live_libraries.load(); }
__attribute__((visibility("default"))) int fakecuda_preserved_libraries(void) { return g_preserved_libraries.load(); }
__attribute__((visibility("default"))) int fakecuda_launches(void) { return g_launches.load(); }
__attribute__((visibility("default"))) int fakecuda_stale_uses(void) { return g_stale_uses.load(); }
__attribute__((visibility("default"))) int fakecuda_live_modules_in(void* ctx) {
  std::lock_guard<std::mutex> lock(g_mu);
  int n = 0;
  for (const auto* m : g_modules) n += m->ctx == ctx;
  return n;
}
// Copies up to `size` bytes of the last launch's parameter buffer (laid out as the kernel's
// parameters are) into `out`; returns its size (0: no launch with parameters yet).
__attribute__((visibility("default"))) int fakecuda_last_launch_params(void* out, int size) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (out && size > 0)
    std::memcpy(out, g_last_params.data(), std::min(g_last_params.size(), static_cast<std::size_t>(size)));
  return static_cast<int>(g_last_params.size());
}
__attribute__((visibility("default"))) int fakecuda_primary_refcount(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (device < 0 || static_cast<std::size_t>(device) >= g_primary.size()) return -1;
  return g_primary[static_cast<std::size_t>(device)].refcount;
}

}  // extern "C"
