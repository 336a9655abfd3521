// cuLink JIT (see culink.hpp).
#include "jit/culink.hpp"

#include "platform/clock.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace fatpack::detail {

namespace {

// Frees the link state on every path (the cubin it returns lives inside it).
struct link_state {
  const driver& d;
  CUlinkState s = nullptr;
  ~link_state() {
    if (s) (void)d.cuLinkDestroy(s);
  }
};

std::string trim_log(const char* buf, std::size_t cap) {
  std::size_t n = strnlen(buf, cap);
  while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) --n;
  return std::string(buf, n);
}

}  // namespace

result<jit_output> jit_link(const driver& d, core::byte_span ptx, std::string_view name, const jit_options& opts,
                            std::optional<std::uint32_t> target) {
  return jit_link(d, std::vector<core::byte_span>{ptx}, name, opts, target);
}

result<jit_output> jit_link(const driver& d, const std::vector<core::byte_span>& ptx_parts, std::string_view name,
                            const jit_options& opts, std::optional<std::uint32_t> target) {
  constexpr std::size_t log_size = 64 * 1024;
  auto info = std::make_unique<char[]>(log_size);
  auto err = std::make_unique<char[]>(log_size);
  info[0] = err[0] = 0;

  std::vector<CUjit_option> keys;
  std::vector<void*> vals;
  auto add = [&](CUjit_option k, std::uintptr_t v) {
    keys.push_back(k);
    vals.push_back(reinterpret_cast<void*>(v));
  };
  add(CU_JIT_INFO_LOG_BUFFER, reinterpret_cast<std::uintptr_t>(info.get()));
  add(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, log_size - 1);
  add(CU_JIT_ERROR_LOG_BUFFER, reinterpret_cast<std::uintptr_t>(err.get()));
  add(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, log_size - 1);
  add(CU_JIT_LOG_VERBOSE, 1);
  if (opts.optimization_level >= 0) add(CU_JIT_OPTIMIZATION_LEVEL, static_cast<std::uintptr_t>(opts.optimization_level));
  if (opts.max_registers > 0) add(CU_JIT_MAX_REGISTERS, static_cast<std::uintptr_t>(opts.max_registers));
  if (opts.line_info) add(CU_JIT_GENERATE_LINE_INFO, 1);
  if (opts.debug_info) add(CU_JIT_GENERATE_DEBUG_INFO, 1);
  if (target) add(CU_JIT_TARGET, *target);

  std::string what(name);
  auto fail = [&](errc code, const char* call, CUresult r) -> result<jit_output> {
    std::string log = trim_log(err.get(), log_size);
    std::string ilog = trim_log(info.get(), log_size);
    if (!ilog.empty()) log += (log.empty() ? "" : "\n") + ilog;
    return cuda_error(code, r, "JIT of " + what + ": " + d.call_failed(call, r), std::move(log));
  };

  // The inputs' names outlive the link state (declared first, destroyed last): a linker may keep a
  // name and read it again in cuLinkComplete, as nvJitLink does (see nvjitlink.cpp).
  std::vector<std::string> part_names;
  part_names.reserve(ptx_parts.size());
  link_state ls{d};
  CUresult r = d.cuLinkCreate(static_cast<unsigned>(keys.size()), keys.data(), vals.data(), &ls.s);
  if (r != CUDA_SUCCESS) return fail(errc::jit_failed, "cuLinkCreate", r);
  stopwatch sw;
  for (std::size_t k = 0; k < ptx_parts.size(); ++k) {
    part_names.push_back(ptx_parts.size() > 1 ? what + " part " + std::to_string(k) : what);
    r = d.cuLinkAddData(ls.s, CU_JIT_INPUT_PTX, const_cast<std::uint8_t*>(ptx_parts[k].data), ptx_parts[k].size,
                        part_names.back().c_str(), 0, nullptr, nullptr);
    if (r != CUDA_SUCCESS) {
      const std::string call = ptx_parts.size() > 1 ? "cuLinkAddData (part " + std::to_string(k) + ")" : "cuLinkAddData";
      return fail(errc::jit_failed, call.c_str(), r);
    }
  }
  void* cubin = nullptr;
  std::size_t cubin_size = 0;
  r = d.cuLinkComplete(ls.s, &cubin, &cubin_size);
  if (r != CUDA_SUCCESS) return fail(errc::jit_failed, "cuLinkComplete", r);
  jit_output out;
  out.wall_ms = sw.ms();
  // Copy before cuLinkDestroy: the cubin belongs to the link state.
  const auto* p = static_cast<const std::uint8_t*>(cubin);
  out.sass.assign(p, p + cubin_size);
  out.info_log = trim_log(info.get(), log_size);
  return out;
}

}  // namespace fatpack::detail
