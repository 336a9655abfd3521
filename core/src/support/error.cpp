// The one error vocabulary (fatpack/error.hpp), defined here because core and the runtime share it:
// the names of codes and faults (part of the interface: tests and scripts match on them; never
// rename one, only add), error::what(), the std::error_category, fatpack::exception's key function.
#include "fatpack/core/error.hpp"

#include <mutex>
#include <string>

namespace fatpack {

const char* fault_name(fault f) noexcept {
  switch (f) {
    case fault::none: return "none";
    case fault::io: return "io";
    case fault::truncated: return "truncated";
    case fault::bad_magic: return "bad_magic";
    case fault::unsupported_version: return "unsupported_version";
    case fault::malformed: return "malformed";
    case fault::checksum: return "checksum";
    case fault::codec: return "codec";
    case fault::unknown_kind: return "unknown_kind";
    case fault::unsupported: return "unsupported";
    case fault::invalid_argument: return "invalid_argument";
  }
  // A value outside the enum (e.g. cast from a corrupted integer): still a valid C string.
  return "unknown";
}


const char* errc_name(errc code) noexcept {
  switch (code) {
    case errc::ok: return "ok";
    case errc::no_driver: return "no_driver";
    case errc::driver_too_old: return "driver_too_old";
    case errc::driver_symbol_missing: return "driver_symbol_missing";
    case errc::no_device: return "no_device";
    case errc::invalid_device: return "invalid_device";
    case errc::no_packages: return "no_packages";
    case errc::not_found: return "not_found";
    case errc::ambiguous: return "ambiguous";
    case errc::no_compatible_entry: return "no_compatible_entry";
    case errc::load_failed: return "load_failed";
    case errc::jit_failed: return "jit_failed";
    case errc::bad_package: return "bad_package";
    case errc::io: return "io";
    case errc::invalid_argument: return "invalid_argument";
    case errc::cuda: return "cuda";
  }
  return "unknown";
}

exception::~exception() = default;

namespace {

class fatpack_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "fatpack"; }
  std::string message(int value) const override { return errc_name(static_cast<errc>(value)); }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const fatpack_category category;
  return category;
}

const char* error::what() const {
  std::lock_guard<std::mutex> lock(what_.mu);
  if (what_.valid && what_.code == code && what_.message == message && what_.log == log &&
      what_.reason == reason)
    return what_.text.c_str();
  std::string s = "fatpack: " + std::string(errc_name(code)) + (reason == fault::none ? std::string() : " (" + std::string(fault_name(reason)) + ")") +
                  ": " + message;
  if (!log.empty()) {
    s += "\nlog:";
    std::size_t pos = 0;
    while (pos < log.size()) {
      std::size_t nl = log.find('\n', pos);
      s += "\n  " + log.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
  }
  what_.text = std::move(s);
  what_.code = code;
  what_.message = message;
  what_.log = log;
  what_.reason = reason;
  what_.valid = true;
  return what_.text.c_str();
}

}  // namespace fatpack
