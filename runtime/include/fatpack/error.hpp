// fatpack runtime errors: errors as values, plus a throwing convenience layer.
//
// Policy: no runtime function throws on a failure it can describe. Each returns result<T> or
// status holding an `error` {code, CUDA status, message, log, reason}. The message names what
// failed and where ("module 'vadd' of package 'app' on device 0 (NVIDIA H200, CC 9.0): ..."); `log`
// carries a JIT info/error log when there is one; `reason` the finer cause of a malformed package.
// The codes are also std::error_codes (error_category()). The throwing layer is `value()` on a
// failed result (and status::throw_if_error()), which throws fatpack::exception holding the same
// error.
//
// This header includes no CUDA header: the CUDA status is a plain int (a CUresult value).
#pragma once

#include "fatpack/export.h"

#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

FATPACK_BEGIN_HIDDEN
namespace fatpack {

// Stable numbers: the C API (fatpack.h, fatpack_status) uses the same values.
enum class errc : int {
  ok = 0,
  no_driver = 1,              // libcuda could not be loaded (the message names the path)
  driver_too_old = 2,         // the driver is older than fatpack needs (CUDA 12.0)
  driver_symbol_missing = 3,  // a driver entry point is missing (the message names it)
  no_device = 4,              // cuInit reported no device, or there are 0 devices
  invalid_device = 5,         // a device ordinal out of range
  no_packages = 6,            // nothing is registered (embedded records missing: see the message)
  not_found = 7,              // no such package, module or kernel
  ambiguous = 8,              // a module name in several packages, a kernel name several kernels have
  no_compatible_entry = 9,    // selection: no entry of the module can run on the device
  load_failed = 10,           // every usable entry was refused by the driver
  jit_failed = 11,            // PTX -> SASS failed (the JIT log is in error::log)
  bad_package = 12,           // a package or image is malformed (parse, checksum, decompression)
  io = 13,                    // a file could not be read
  invalid_argument = 14,      // a meaningless argument (empty name, null pointer, ...)
  cuda = 15,                  // another driver call failed (error::cuda_status has the CUresult)
};

// "no_driver", "jit_failed", ...
FATPACK_API const char* errc_name(errc code) noexcept;

// What exactly was wrong with bytes from outside (a package, an image, nvcc output), as the readers
// in core (fatpack/core) name it: core's functions return the same error type, with this as
// error::reason and the code derived from it (io -> errc::io, invalid_argument ->
// errc::invalid_argument, any other -> errc::bad_package). none for every other error.
enum class fault : int {
  none = 0,
  io,                   // a file could not be read or written
  truncated,            // input ends before a structure it declares
  bad_magic,            // not the expected kind of file
  unsupported_version,
  malformed,            // an offset, size or field is out of range or inconsistent
  checksum,             // an XXH3 does not match
  codec,                // compressed data could not be decoded
  unknown_kind,         // input kind not recognised
  unsupported,          // valid input fatpack cannot handle (e.g. an unknown NVIDIA compression)
  invalid_argument,     // a caller passed something meaningless (unknown target string, ...)
};
// "truncated", "checksum", ... ("none" for fault::none). Stable: tests and scripts match on them.
FATPACK_API const char* fault_name(fault f) noexcept;
// The code an error with this fault has (see fault).
constexpr errc code_of(fault f) noexcept {
  return f == fault::none ? errc::ok
         : f == fault::io ? errc::io
         : f == fault::invalid_argument ? errc::invalid_argument
                                        : errc::bad_package;
}

// errc as a std::error_code: category name "fatpack", message(int) is errc_name() ("jit_failed"),
// so `std::error_code ec = fatpack::errc::io;` and `ec == fatpack::errc::io` work.
FATPACK_API const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc code) noexcept {
  return std::error_code(static_cast<int>(code), error_category());
}

struct error {
  errc code = errc::ok;
  int cuda_status = 0;   // the CUresult that caused it, 0 when none
  std::string message;   // one paragraph, names what failed and where
  std::string log;       // JIT info/error log, may be empty
  // From bytes outside the program (a package, an image, nvcc output): what exactly was wrong, as
  // core's readers name it; fault::none when there is no finer reason. what() shows it after the
  // code: "fatpack: bad_package (truncated): ...".
  fault reason = fault::none;

  error() = default;
  error(errc c, int status, std::string msg = {}, std::string jit_log = {})
      : code(c), cuda_status(status), message(std::move(msg)), log(std::move(jit_log)) {}
  // An error about outside bytes: the code derived from `f` (code_of), `f` kept as the reason.
  error(fault f, std::string msg) : code(code_of(f)), message(std::move(msg)), reason(f) {}

  // "fatpack: <code>: <message>", then the log indented when there is one; like
  // std::exception::what(), a NUL-terminated string (printf("%s", e.what()) is fine). The text is
  // composed into the error on demand; several threads may call what() on one const error at once.
  // The pointer stays valid until the error is changed (code, message or log) or destroyed.
  FATPACK_API const char* what() const;

  // The code as a std::error_code of error_category() (errc::ok gives a false error_code).
  std::error_code code_as_std() const noexcept { return make_error_code(code); }

 private:
  // The composed text and what it was composed from; copies start empty.
  class what_cache {
   public:
    what_cache() = default;
    what_cache(const what_cache&) {}
    what_cache& operator=(const what_cache&) { return *this; }
    std::mutex mu;
    bool valid = false;
    errc code = errc::ok;
    fault reason = fault::none;
    std::string message, log, text;
  };
  mutable what_cache what_;
};

// FATPACK_API, with its key function (the destructor) in the runtime: its vtable and typeinfo are
// the runtime's, not emitted in (and exported from) every library that includes this header.
class FATPACK_API exception : public std::runtime_error {
 public:
  explicit exception(fatpack::error e) : std::runtime_error(e.what()), error_(std::move(e)) {}
  ~exception() override;
  const fatpack::error& error() const noexcept { return error_; }

 private:
  fatpack::error error_;
};

// Either a value or an error. value() on an error throws fatpack::exception (the throwing layer);
// check has_value() / operator bool first to stay exception-free.
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  result(fatpack::error e) : v_(std::in_place_index<1>, std::move(e)) {}

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  // From a temporary, the value itself (moved out): a reference into the temporary would dangle in
  // `for (auto& p : fatpack::packages().value())`, the temporary gone before the loop's body runs.
  T value() && { check(); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // Precondition: !has_value().
  const fatpack::error& error() const& { return std::get<1>(v_); }
  fatpack::error error() && { return std::get<1>(std::move(v_)); }

 private:
  void check() const {
    if (v_.index() != 0) throw exception(std::get<1>(v_));
  }
  std::variant<T, fatpack::error> v_;
};

// result<void>: empty on success.
class [[nodiscard]] status {
 public:
  status() = default;
  status(fatpack::error e) : error_(std::move(e)) {}
  bool ok() const noexcept { return error_.code == errc::ok; }
  explicit operator bool() const noexcept { return ok(); }
  const fatpack::error& error() const noexcept { return error_; }
  void throw_if_error() const {
    if (!ok()) throw exception(error_);
  }

 private:
  fatpack::error error_;
};

}  // namespace fatpack
FATPACK_END_HIDDEN

namespace std {
template <>
struct is_error_code_enum<fatpack::errc> : true_type {};
}  // namespace std
