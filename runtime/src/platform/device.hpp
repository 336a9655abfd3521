// Devices: compute capability, driver version and the highest PTX ISA that driver accepts, name,
// UUID; and the device's primary context, the one cudart uses too, so that kernels loaded by fatpack
// launch in a cudart application without any context juggling.
//
// Policy: devices are enumerated once per process, after the driver loaded. 0 devices is an error
// (errc::no_device) that names the driver. Every user of a primary context inside fatpack (a loaded
// module, a running JIT) holds its own reference (primary_context, RAII), so fatpack never releases a
// reference it did not take. In addition, the first use of a device keeps one reference for the life
// of the process, as cudart does: creating a primary context costs 100-300 ms (130 ms measured on the
// H200), and a driver-only application that loads and drops modules would otherwise pay it again each
// time its last module goes.
#pragma once

#include "platform/driver.hpp"

#include "fatpack/core/target.hpp"
#include "fatpack/fatpack.hpp"

#include <array>
#include <string>
#include <vector>

namespace fatpack::detail {

struct device {
  int ordinal = 0;
  CUdevice handle = 0;
  int cc_major = 0, cc_minor = 0;
  std::uint32_t arch = 0;  // cc_major*10 + cc_minor
  bool integrated = false;
  bool tegra = false;  // integrated on a Tegra platform: the selector's no-minor-compatibility rule
  std::string name;
  std::array<std::uint8_t, 16> uuid{};
  int driver_version = 0;
  core::ptx_isa max_ptx_isa;  // from arch_table (max_ptx_isa_for_driver)

  // "device 0 (NVIDIA H200, CC 9.0)"
  std::string identify() const;
  device_info info() const;
};

struct device_set {
  const driver* drv = nullptr;
  std::vector<device> devices;
};

// The driver plus every device, loaded once per process (thread-safe).
const result<const device_set*>& load_devices();

// Resolves load_options::device: an ordinal, or -1 for the device of the calling thread's current
// context (device 0 when there is none).
result<const device*> pick_device(const device_set& set, int ordinal);

// A reference on a device's primary context (cuDevicePrimaryCtxRetain / Release). Move-only.
class primary_context {
 public:
  primary_context() = default;
  static result<primary_context> retain(const driver& d, const device& dev);
  primary_context(primary_context&& o) noexcept : d_(o.d_), dev_(o.dev_), ctx_(o.ctx_) { o.ctx_ = nullptr; }
  primary_context& operator=(primary_context&& o) noexcept;
  primary_context(const primary_context&) = delete;
  primary_context& operator=(const primary_context&) = delete;
  ~primary_context() { release(); }
  CUcontext get() const { return ctx_; }

 private:
  void release() noexcept;
  const driver* d_ = nullptr;
  const device* dev_ = nullptr;
  CUcontext ctx_ = nullptr;
};

// The context a load goes into (issue 11): the calling thread's current context when it has one on
// the device, else the device's primary context (shared with cudart).
struct target_context {
  CUcontext ctx = nullptr;
  bool primary = false;          // ctx is the device's primary context
  bool has_id = false;           // the driver has cuCtxGetId
  unsigned long long id = 0;     // cuCtxGetId(ctx): unique for the process, unlike the pointer
  bool thread_had_none = false;  // the calling thread had no (live) current context
  double ms = 0;                 // choosing it (creating the primary context, the first time: 100-300 ms)
  primary_context primary_ref;   // fatpack's reference when ctx is the primary context
};

// Chooses the context for a load on `dev` (see target_context), retaining the primary context when
// it is the one. A driver without cuCtxGetId: the primary context only (a current own context is
// errc::driver_symbol_missing, explaining what to do), since contexts would be told apart by address
// alone and a destroyed context's address can come back.
result<target_context> choose_context(const driver& d, const device& dev);

// Whether `ctx` is still the context a module was loaded in: cuCtxGetId(ctx) answers and gives `id`
// (a destroyed context fails; a new context at the same address has another id). Without
// cuCtxGetId (has_id false): whether the context can still be made current.
bool context_alive(const driver& d, CUcontext ctx, bool has_id, unsigned long long id);

// Takes the process-lifetime reference on the device's primary context (once per device; later calls
// return at once).
status keep_primary_context(const driver& d, const device& dev);

// "GPU-6a1b...": the format nvidia-smi prints.
std::string uuid_string(const std::array<std::uint8_t, 16>& uuid);

}  // namespace fatpack::detail
