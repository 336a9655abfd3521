// Typed kernels (fatpack/launch.hpp): the lookup through module::function / library::kernel, the
// one-time check of the arguments against the kernel's parameters, and the launch in the code's
// context.
//
// Where the parameters come from: the driver (cuFuncGetParamInfo for a module's CUfunction,
// cuKernelGetParamInfo for a library's CUkernel; CUDA 12.4 and later), which knows the loaded code
// itself, whatever entry was chosen and however it was compiled. A driver without them (12.0-12.3):
// the `.param` list of the kernel's `.entry` in the module's PTX in the package (the loaded entry when
// it is PTX, else the module's first PTX entry: the same source, so the same parameters), read with
// core::parse_ptx; the note says so. No PTX, no such .entry, or a list the reader does not
// understand: no check; the typed kernel says so (checked() false, check_note()) and so do its
// launch errors. (A cubin's .nv.info EIATTR_KPARAM_INFO table would serve for SASS-only packages; it
// is not read, being an undocumented format.)
#include "api/code_context.hpp"
#include "api/kernel_binding.hpp"
#include "load/kernel_lookup.hpp"
#include "platform/os.hpp"

#include "fatpack/core/input.hpp"
#include "fatpack/fatpack.hpp"

#include <memory>
#include <vector>

namespace fatpack {

namespace detail {
namespace {

struct param {
  std::size_t offset = 0, size = 0;
};

// Kernel parameters take at most 32764 bytes (CUDA 12.1; 4 KiB before), so at most that many
// parameters: a driver that answers for more indices is not believed.
constexpr std::size_t k_max_params = 32764;

std::string kernel_where(const module_state& s, const std::string& name) {
  return "kernel '" + name + "' in " + code_where(s);
}

// The kernel's parameters from the module's PTX in the package (see the top of this file);
// `known` false and `note` why when there is none to read. `why_not_driver`: "the driver ... has no
// cuFuncGetParamInfo (CUDA 12.4)".
void package_params(const module_state& s, const std::string& name, const std::string& why_not_driver,
                    std::vector<param>& out, bool& known, std::string& note) {
  const auto& view = s.package->view;
  const auto& entries = view.entries();
  std::size_t pick = entries.size();
  if (s.report.entry < entries.size() && entries[s.report.entry].target.kind == core::entry_kind::ptx)
    pick = s.report.entry;
  for (std::size_t i = 0; i < entries.size() && pick == entries.size(); ++i)
    if (entries[i].target.kind == core::entry_kind::ptx && entries[i].module_name == s.module_name) pick = i;
  const std::string unchecked = ", so the arguments of kernel '" + name + "' could not be checked against its parameters";
  if (pick == entries.size()) {
    note = why_not_driver + " and package '" + s.package->name + "' has no PTX of module '" + s.module_name + "'" +
           unchecked;
    return;
  }
  const auto& e = entries[pick];
  // The entry may be one no load has read: its raw_size is only as large as the reader allows (up to
  // the codec's expansion limit times the stored size), so the buffer is allocated without throwing
  // and its failure is this note, as the loader does for the entry it loads.
  std::unique_ptr<os::scratch_buffer> raw;
  core::byte_span text;
  status read;
  if (e.codec == core::codec::none) {
    text = view.stored_payload(pick);
    if (text.size != e.raw_size) read = error{errc::bad_package, 0, "stored size differs from the raw size", {}};
  } else {
    raw = std::make_unique<os::scratch_buffer>(static_cast<std::size_t>(e.raw_size));
    if (!*raw) {
      read = error{errc::bad_package, 0, "out of host memory for " + std::to_string(e.raw_size) + " bytes", {}};
    } else {
      read = view.decompress_into(pick, raw->data());
      text = core::byte_span(raw->data(), static_cast<std::size_t>(e.raw_size));
    }
  }
  const std::string where = "the PTX of package '" + s.package->name + "' (" + e.describe() + ")";
  if (!read) {
    note = why_not_driver + " and " + where + " could not be read (" + read.error().message + ")" + unchecked;
    return;
  }
  auto ptx = core::parse_ptx(text, where);
  // The .entry is named by the kernel's symbol, whatever name (a C++ one) the caller used.
  auto resolved = resolve_kernel(s, name);
  const std::string& symbol = resolved ? *resolved : name;
  std::size_t k = 0;
  while (ptx && k < ptx->kernels.size() && ptx->kernels[k] != symbol) ++k;
  if (!ptx || k == ptx->kernels.size() || !ptx->params[k]) {
    note = why_not_driver + " and " + where +
           (!ptx ? " could not be read (" + ptx.error().message + ")"
                 : k == ptx->kernels.size() ? " has no .entry '" + symbol + "'" : " has a .param list this reader does not understand") +
           unchecked;
    return;
  }
  for (const auto& p : *ptx->params[k]) out.push_back(param{p.offset, p.size});
  known = true;
  note = "checked against the .param list of .entry '" + symbol + "' in " + where + ", since " + why_not_driver;
}

// The kernel's parameters from the driver, else from the package; `known` false (and `note` why)
// when neither can say.
status query_params(const module_state& s, const std::string& name, CUfunction f, CUkernel k, std::vector<param>& out,
                    bool& known, std::string& note) {
  const driver& d = *s.drv;
  known = false;
  if ((f && !d.cuFuncGetParamInfo) || (k && !d.cuKernelGetParamInfo)) {
    package_params(s, name,
                   "the driver " + d.identify() + " has no " + (f ? "cuFuncGetParamInfo" : "cuKernelGetParamInfo") +
                       " (CUDA 12.4)",
                   out, known, note);
    return {};
  }
  // The real driver answers cuKernelGetParamInfo only with a context current
  // (CUDA_ERROR_INVALID_CONTEXT otherwise, seen with driver 580): ask in the context a launch uses.
  auto ctx = code_context(s);
  if (!ctx) return ctx.error();
  scoped_context current(d, *ctx);
  if (!current.ok())
    return cuda_error(errc::cuda, CUDA_ERROR_INVALID_CONTEXT,
                      kernel_where(s, name) + ": its context could not be made current to read its parameters");
  for (std::size_t i = 0;; ++i) {
    param p;
    CUresult r = f ? d.cuFuncGetParamInfo(f, i, &p.offset, &p.size) : d.cuKernelGetParamInfo(k, i, &p.offset, &p.size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;  // i is the number of parameters
    if (r != CUDA_SUCCESS)
      return cuda_error(errc::cuda, r,
                        kernel_where(s, name) + ": " +
                            d.call_failed(f ? "cuFuncGetParamInfo" : "cuKernelGetParamInfo", r));
    if (i >= k_max_params)
      return error{errc::cuda, 0,
                   kernel_where(s, name) + ": the driver reports more than " + std::to_string(k_max_params) +
                       " parameters",
                   {}};
    out.push_back(p);
  }
  known = true;
  return {};
}

std::string describe(const std::vector<param>& ps) {
  std::string s;
  for (const auto& p : ps)
    s += (s.empty() ? "" : ", ") + std::to_string(p.offset) + "+" + std::to_string(p.size);
  return "(" + s + ")";
}

// The host side as cuLaunchKernel copies it: each argument at the next offset aligned to its alignof.
std::vector<param> host_layout(const arg_shape* args, std::size_t count) {
  std::vector<param> out;
  std::size_t end = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t align = args[i].align ? args[i].align : 1;
    param p;
    p.offset = (end + align - 1) / align * align;
    p.size = args[i].size;
    end = p.offset + p.size;
    out.push_back(p);
  }
  return out;
}

// Compares the given arguments with the kernel's parameters: ok, or the first difference.
status compare(const module_state& s, const std::string& name, const std::vector<param>& kernel,
               const std::vector<param>& given) {
  const std::string layouts = "; kernel parameters (offset+size) " + describe(kernel) + ", arguments given " +
                              describe(given);
  if (kernel.size() != given.size())
    return error{errc::invalid_argument, 0,
                 kernel_where(s, name) + ": the kernel takes " + std::to_string(kernel.size()) + " parameter" +
                     (kernel.size() == 1 ? "" : "s") + ", " + std::to_string(given.size()) + " argument" +
                     (given.size() == 1 ? " was" : "s were") + " given" + layouts,
                 {}};
  for (std::size_t i = 0; i < kernel.size(); ++i) {
    if (kernel[i].offset == given[i].offset && kernel[i].size == given[i].size) continue;
    return error{errc::invalid_argument, 0,
                 kernel_where(s, name) + ": argument " + std::to_string(i + 1) + " of " +
                     std::to_string(kernel.size()) + ": the kernel's parameter is " + std::to_string(kernel[i].size) +
                     " bytes at offset " + std::to_string(kernel[i].offset) + ", the argument given is " +
                     std::to_string(given[i].size) + " bytes at offset " + std::to_string(given[i].offset) + layouts,
                 {}};
  }
  return {};
}

result<std::shared_ptr<const kernel_binding>> bind(const std::shared_ptr<module_state>& st, std::string_view name,
                                                   CUfunction f, CUkernel k, const arg_shape* args, std::size_t count) {
  auto b = std::make_shared<kernel_binding>();
  b->state = st;
  b->name = std::string(name);
  b->function = f;
  b->kernel = k;
  std::vector<param> params;
  bool known = false;
  if (auto s = query_params(*st, b->name, f, k, params, known, b->note); !s) return s.error();
  if (known) {
    if (auto s = compare(*st, b->name, params, host_layout(args, count)); !s) {
      error e = s.error();
      if (!b->note.empty()) e.message += "; " + b->note;  // where the parameters came from
      return e;
    }
    b->checked = true;
  }
  return std::shared_ptr<const kernel_binding>(std::move(b));
}

}  // namespace

status launch_kernel(const kernel_binding& k, dims grid, dims block, unsigned shared_bytes, cu_stream stream,
                     void** args) {
  const module_state& s = *k.state;
  auto ctx = code_context(s);
  if (!ctx) {
    error e = ctx.error();
    e.message = "cannot launch kernel '" + k.name + "': " + e.message;
    return e;
  }
  scoped_context current(*s.drv, *ctx);
  if (!current.ok())
    return cuda_error(errc::cuda, CUDA_ERROR_INVALID_CONTEXT,
                      "cannot launch " + kernel_where(s, k.name) + ": its context could not be made current");
  CUfunction f = k.function ? k.function : reinterpret_cast<CUfunction>(k.kernel);
  CUresult r = s.drv->cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream,
                                     args, nullptr);
  if (r != CUDA_SUCCESS)
    return cuda_error(errc::cuda, r,
                      "launch of " + kernel_where(s, k.name) + " (grid " + std::to_string(grid.x) + "x" +
                          std::to_string(grid.y) + "x" + std::to_string(grid.z) + ", block " +
                          std::to_string(block.x) + "x" + std::to_string(block.y) + "x" + std::to_string(block.z) +
                          ", " + std::to_string(shared_bytes) + " B shared): " +
                          s.drv->call_failed("cuLaunchKernel", r) +
                          (k.checked ? std::string() : "; note: " + k.note));
  return {};
}

bool binding_checked(const kernel_binding& k) noexcept { return k.checked; }
namespace {
const std::string k_empty;
}  // namespace
const std::string& binding_note(const kernel_binding* k) noexcept { return k ? k->note : k_empty; }
const std::string& binding_name(const kernel_binding* k) noexcept { return k ? k->name : k_empty; }

}  // namespace detail

result<std::shared_ptr<const detail::kernel_binding>> module::bind(std::string_view name, const detail::arg_shape* args,
                                                                   std::size_t count) const {
  auto f = function(name);  // the module's lookup (and its errors: empty handle, destroyed context, not found)
  if (!f) return std::move(f).error();
  return detail::bind(state_, name, *f, nullptr, args, count);
}

result<std::shared_ptr<const detail::kernel_binding>> library::bind(std::string_view name, const detail::arg_shape* args,
                                                                    std::size_t count) const {
  auto k = kernel(name);  // the library's lookup
  if (!k) return std::move(k).error();
  return detail::bind(state_, name, nullptr, *k, args, count);
}

}  // namespace fatpack
