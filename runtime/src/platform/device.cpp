// Device enumeration and primary contexts (see device.hpp).
#include "platform/device.hpp"

#include "platform/clock.hpp"
#include "platform/load_once.hpp"
#include "platform/os.hpp"

#include "fatpack/core/arch_table.hpp"
#include "fatpack/core/hex.hpp"

#include <cstdio>
#include <cstring>
#include <mutex>

namespace fatpack::detail {

namespace {

result<const device_set*> load_device_set() {
  const auto& d = load_driver();
  if (!d) return d.error();
  const driver& drv = **d;
  auto* set = new device_set();  // never freed, like the driver
  set->drv = &drv;
  int n = 0;
  CUresult r = drv.cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS) {
    delete set;
    return cuda_error(errc::cuda, r, drv.call_failed("cuDeviceGetCount", r));
  }
  if (n <= 0) {
    delete set;
    return error{errc::no_device, 0, "no CUDA device: the driver " + drv.identify() + " reports 0 devices", {}};
  }
  for (int i = 0; i < n; ++i) {
    device dev;
    dev.ordinal = i;
    dev.driver_version = drv.version;
    dev.max_ptx_isa = core::max_ptx_isa_for_driver(drv.version);
    auto fail = [&](const char* call, CUresult rr) -> result<const device_set*> {
      delete set;
      return cuda_error(errc::cuda, rr, "device " + std::to_string(i) + ": " + drv.call_failed(call, rr));
    };
    if ((r = drv.cuDeviceGet(&dev.handle, i)) != CUDA_SUCCESS) return fail("cuDeviceGet", r);
    if ((r = drv.cuDeviceGetAttribute(&dev.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev.handle)) !=
        CUDA_SUCCESS)
      return fail("cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)", r);
    if ((r = drv.cuDeviceGetAttribute(&dev.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev.handle)) !=
        CUDA_SUCCESS)
      return fail("cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)", r);
    dev.arch = static_cast<std::uint32_t>(dev.cc_major * 10 + dev.cc_minor);
    int integrated = 0;
    if (drv.cuDeviceGetAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, dev.handle) == CUDA_SUCCESS)
      dev.integrated = integrated != 0;
    dev.tegra = dev.integrated && os::is_tegra_platform();
    char name[256] = {};
    if (drv.cuDeviceGetName(name, sizeof name - 1, dev.handle) == CUDA_SUCCESS) dev.name = name;
    CUuuid uuid{};
    if (drv.cuDeviceGetUuid(&uuid, dev.handle) == CUDA_SUCCESS) std::memcpy(dev.uuid.data(), uuid.bytes, 16);
    set->devices.push_back(std::move(dev));
  }
  return static_cast<const device_set*>(set);
}

}  // namespace

const result<const device_set*>& load_devices() {
  static std::atomic<const result<const device_set*>*> loaded{nullptr};  // see platform/load_once.hpp
  return load_once(loaded, load_device_set);
}

result<const device*> pick_device(const device_set& set, int ordinal) {
  if (ordinal < -1)  // only -1 means "current"; -2 was taken as it, and device_info(-2) refused it
    return error{errc::invalid_device, 0,
                 "device " + std::to_string(ordinal) + " does not exist (-1 means the current context's device; " +
                     std::to_string(set.devices.size()) + " device(s) present)",
                 {}};
  if (ordinal == -1) {
    // The calling thread's current context decides (cudaSetDevice makes the primary context of that
    // device current), so a cudart application gets its own device by default.
    CUcontext cur = nullptr;
    CUdevice dev = 0;
    if (set.drv->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur && set.drv->cuCtxGetDevice(&dev) == CUDA_SUCCESS) {
      for (const auto& d : set.devices)
        if (d.handle == dev) return &d;
    }
    return &set.devices.front();
  }
  if (static_cast<std::size_t>(ordinal) >= set.devices.size())
    return error{errc::invalid_device, 0,
                 "device " + std::to_string(ordinal) + " does not exist (" + std::to_string(set.devices.size()) +
                     " device(s) present)",
                 {}};
  return &set.devices[static_cast<std::size_t>(ordinal)];
}

std::string device::identify() const {
  return "device " + std::to_string(ordinal) + " (" + (name.empty() ? "unnamed" : name) + ", CC " +
         std::to_string(cc_major) + "." + std::to_string(cc_minor) + ")";
}

device_info device::info() const {
  device_info i;
  i.ordinal = ordinal;
  i.cc_major = cc_major;
  i.cc_minor = cc_minor;
  i.arch = arch;
  i.integrated = integrated;
  i.driver_version = driver_version;
  i.max_ptx_isa = max_ptx_isa.known() ? max_ptx_isa.str() : std::string();
  i.name = name;
  i.uuid = uuid;
  i.uuid_str = uuid_string(uuid);
  return i;
}

std::string uuid_string(const std::array<std::uint8_t, 16>& u) {
  // nvidia-smi's spelling: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
  const std::string h = core::hex_bytes(u.data(), u.size());
  return "GPU-" + h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

status keep_primary_context(const driver& d, const device& dev) {
  static std::mutex mu;
  static std::vector<int>* kept = new std::vector<int>();  // ordinals; leaked like the device set
  std::lock_guard<std::mutex> lock(mu);
  for (int o : *kept)
    if (o == dev.ordinal) return {};
  CUcontext ctx = nullptr;
  CUresult r = d.cuDevicePrimaryCtxRetain(&ctx, dev.handle);
  if (r != CUDA_SUCCESS)
    return cuda_error(errc::cuda, r, dev.identify() + ": " + d.call_failed("cuDevicePrimaryCtxRetain", r));
  kept->push_back(dev.ordinal);  // never released: see the policy in device.hpp
  return {};
}

result<target_context> choose_context(const driver& d, const device& dev) {
  stopwatch sw;
  target_context t;
  CUcontext cur = nullptr;
  CUdevice cur_dev = 0;
  // A current context that the driver no longer knows (destroyed) counts as none.
  const bool have_current =
      d.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur && d.cuCtxGetDevice(&cur_dev) == CUDA_SUCCESS;
  t.thread_had_none = !have_current;
  bool own = false;
  if (have_current && cur_dev == dev.handle) {
    // Is it the primary context? Only an active primary context can be current; retaining an active
    // one creates nothing (an application with its own context never gets a primary one from us).
    unsigned flags = 0;
    int active = 0;
    own = true;
    if (d.cuDevicePrimaryCtxGetState(dev.handle, &flags, &active) == CUDA_SUCCESS && active) {
      auto pc = primary_context::retain(d, dev);
      if (!pc) return std::move(pc).error();
      own = pc->get() != cur;
    }
  }
  if (own) {
    // The application's own context (cuCtxCreate): its modules must live there. Without cuCtxGetId a
    // module there could not be told from one of a later context at the same address (after a
    // cuCtxDestroy), and fatpack would hand a dead module to the driver: refused, with what to do.
    if (!d.cuCtxGetId)
      return error{errc::driver_symbol_missing, 0,
                   dev.identify() + ": the calling thread's current context is not the device's primary context, "
                   "and the driver " + d.identify() + " has no cuCtxGetId (CUDA 12.0), which fatpack needs to "
                   "keep modules in an application's own context; make the primary context current "
                   "(cuDevicePrimaryCtxRetain + cuCtxSetCurrent, or cudaSetDevice) or use an NVIDIA driver "
                   "for CUDA 12.0 or newer", {}};
    t.ctx = cur;
  } else {
    if (auto k = keep_primary_context(d, dev); !k) return k.error();
    auto pc = primary_context::retain(d, dev);
    if (!pc) return std::move(pc).error();
    t.ctx = pc->get();
    t.primary = true;
    t.primary_ref = std::move(pc.value());
  }
  if (d.cuCtxGetId) {
    CUresult r = d.cuCtxGetId(t.ctx, &t.id);
    if (r != CUDA_SUCCESS)
      return cuda_error(errc::cuda, r, dev.identify() + ": " + d.call_failed("cuCtxGetId", r));
    t.has_id = true;
  }
  t.ms = sw.ms();
  return t;
}

bool context_alive(const driver& d, CUcontext ctx, bool has_id, unsigned long long id) {
  if (!ctx) return false;
  if (has_id && d.cuCtxGetId) {
    unsigned long long now = 0;
    return d.cuCtxGetId(ctx, &now) == CUDA_SUCCESS && now == id;
  }
  scoped_context current(d, ctx);
  return current.ok();
}

result<primary_context> primary_context::retain(const driver& d, const device& dev) {
  primary_context pc;
  CUresult r = d.cuDevicePrimaryCtxRetain(&pc.ctx_, dev.handle);
  if (r != CUDA_SUCCESS)
    return cuda_error(errc::cuda, r, dev.identify() + ": " + d.call_failed("cuDevicePrimaryCtxRetain", r));
  pc.d_ = &d;
  pc.dev_ = &dev;
  return pc;
}

primary_context& primary_context::operator=(primary_context&& o) noexcept {
  if (this != &o) {
    release();
    d_ = o.d_;
    dev_ = o.dev_;
    ctx_ = o.ctx_;
    o.ctx_ = nullptr;
  }
  return *this;
}

void primary_context::release() noexcept {
  if (ctx_ && d_ && dev_) (void)d_->cuDevicePrimaryCtxRelease(dev_->handle);
  ctx_ = nullptr;
}

}  // namespace fatpack::detail
