// Typed kernel launch (docs/runtime.md §1, "Typed launch"): a kernel looked up with its argument
// types, checked once against the kernel's real parameters, then launched with values instead of a
// void* array.
//
//   auto k = lib.kernel<const float*, float*, int>("vadd").value();   // module::kernel<...> alike
//   k.launch(blocks, 256, 0, stream, x, y, n);                        // status; errors as values
//
// The check (when the typed kernel is made, not on each launch): the host lays the arguments out as
// cuLaunchKernel reads them, each at the next offset aligned to alignof(T), sizeof(T) bytes; the
// kernel's parameters come from the driver (cuFuncGetParamInfo / cuKernelGetParamInfo, drivers for
// CUDA 12.4 and later), else from the `.param` list of the kernel in the module's PTX in the package.
// Their number, offsets and sizes must agree, else the lookup is an error naming the argument, the
// expected and given offset and size, the kernel, module, package, device and driver. Neither
// available (an older driver and a package without the module's PTX): no check is possible, the
// typed kernel says so (checked() false, check_note()) and so does any error of its launches.
//
// This header includes no CUDA header: CUstream_st* is what cuda.h calls CUstream and cuda_runtime.h
// cudaStream_t, so either converts.
#pragma once

#include "fatpack/error.hpp"
#include "fatpack/export.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

struct CUstream_st;

FATPACK_BEGIN_HIDDEN
namespace fatpack {

using cu_stream = ::CUstream_st*;  // CUstream, cudaStream_t

// A grid or block shape: dims(256) is 256 x 1 x 1.
struct dims {
  unsigned x = 1, y = 1, z = 1;
  constexpr dims(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) noexcept : x(x_), y(y_), z(z_) {}
};

// Which kind of code a module loaded (loaded_code::variant()): derived from its load report.
enum class variant_kind {
  none = 0,                // an empty handle
  exact_sass = 1,          // SASS built for exactly the device's CC (sm_90 on CC 9.0)
  lower_minor_sass = 2,    // SASS of the same major, lower minor (sm_80 on CC 8.6)
  arch_specific_sass = 3,  // `a` SASS (sm_90a): runs only on that CC
  family_sass = 4,         // `f` SASS (sm_100f): the family's CCs
  ptx_jit = 5,             // PTX compiled by the JIT for this device
};
FATPACK_API const char* variant_kind_name(variant_kind k) noexcept;  // "exact SASS", "PTX through the JIT", ...

struct code_variant {
  variant_kind kind = variant_kind::none;
  std::string target;           // the loaded entry's target: "sm_90", "sm_80", "sm_90a", "compute_80"
  std::uint32_t arch = 0;       // its architecture (80 for sm_80 and compute_80)
  std::string ptx_isa;          // ptx_jit: the PTX's ISA ("9.0"); "" for SASS
  std::uint32_t device_arch = 0;  // the device's CC, major*10+minor
};

// A __constant__ or __device__ variable of loaded code (loaded_code::global()).
struct global_info {
  std::uint64_t address = 0;  // CUdeviceptr (for a library: in the current context's device)
  std::size_t size = 0;       // bytes
};

namespace detail {
struct kernel_binding;  // the checked kernel: its handle, its code, what the check found
struct arg_shape {
  std::size_t size;
  std::size_t align;
};
FATPACK_API status launch_kernel(const kernel_binding& k, dims grid, dims block, unsigned shared_bytes,
                                 cu_stream stream, void** args);
FATPACK_API bool binding_checked(const kernel_binding& k) noexcept;
// "" for an empty handle (nullptr).
FATPACK_API const std::string& binding_note(const kernel_binding* k) noexcept;
FATPACK_API const std::string& binding_name(const kernel_binding* k) noexcept;
FATPACK_API code_variant binding_variant(const kernel_binding& k);
}  // namespace detail

// A kernel with its argument types. Copyable; keeps its module or library loaded.
template <class... Args>
class typed_kernel {
  static_assert((... && !std::is_reference_v<Args>), "kernel arguments are passed by value: no references");
  static_assert((... && std::is_trivially_copyable_v<Args>),
                "kernel arguments are copied as bytes: each type must be trivially copyable");

 public:
  typed_kernel() = default;
  explicit typed_kernel(std::shared_ptr<const detail::kernel_binding> b) noexcept : b_(std::move(b)) {}

  bool valid() const noexcept { return b_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }

  // cuLaunchKernel in the code's context (a module: its own; a library: the calling thread's current
  // context on the device, else the device's primary context); the caller's current context is the
  // same after. Asynchronous as cuLaunchKernel: an error of the kernel itself shows at the next
  // synchronisation.
  status launch(dims grid, dims block, unsigned shared_bytes, cu_stream stream, const Args&... args) const {
    if (!b_) return error{errc::invalid_argument, 0, "launch(): empty kernel handle", {}};
    void* ptrs[sizeof...(Args) + 1] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
    return detail::launch_kernel(*b_, grid, block, shared_bytes, stream, ptrs);
  }

  // Whether the arguments were checked against the kernel's parameters; check_note(): "" when the
  // driver gave them, else where they came from (the package's PTX) or why there was no check.
  bool checked() const noexcept { return b_ && detail::binding_checked(*b_); }
  const std::string& check_note() const noexcept { return detail::binding_note(b_.get()); }
  const std::string& name() const noexcept { return detail::binding_name(b_.get()); }
  // The variant of the code this kernel runs (today: its module's, every kernel of a module alike).
  code_variant variant() const { return b_ ? detail::binding_variant(*b_) : code_variant{}; }

  // The host layout the check compares: size and alignment of each argument.
  static constexpr detail::arg_shape shapes[sizeof...(Args) + 1] = {{sizeof(Args), alignof(Args)}..., {0, 0}};
  static constexpr std::size_t arity = sizeof...(Args);

 private:
  std::shared_ptr<const detail::kernel_binding> b_;
};

}  // namespace fatpack
FATPACK_END_HIDDEN
