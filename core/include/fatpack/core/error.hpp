// Errors as values for fatpack's core (format, codecs, inputs, selection).
//
// Policy: nothing in core throws on bad input. Every function that can fail on input bytes returns
// result<T> (or status); the message names the file, the entry and the field, e.g.
//   "app.fpk: entry 3 (sm_90 sass): stored_size 12345 runs past the end of the package (9999 bytes)".
#pragma once

#include <cstdint>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace fatpack::core {

enum class errc {
  io = 1,            // a file could not be read or written
  truncated,         // input ends before a structure it declares
  bad_magic,         // not the expected kind of file
  unsupported_version,
  malformed,         // an offset, size or field is out of range or inconsistent
  checksum,          // an XXH3 does not match
  codec,             // compressed data could not be decoded
  unknown_kind,      // input kind not recognised
  unsupported,       // valid input fatpack cannot handle (e.g. an unknown NVIDIA compression)
  invalid_argument,  // a caller passed something meaningless (unknown target string, ...)
};

const char* errc_name(errc code) noexcept;

struct error {
  errc code = errc::malformed;
  std::string message;
};

// A read-only view of bytes (C++17 has no std::span).
struct byte_span {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  byte_span() = default;
  byte_span(const std::uint8_t* d, std::size_t n) : data(d), size(n) {}
  template <class C>
  byte_span(const C& c) : data(reinterpret_cast<const std::uint8_t*>(c.data())), size(c.size()) {}
  byte_span subspan(std::size_t off, std::size_t n) const { return {data + off, n}; }
  const std::uint8_t* begin() const { return data; }
  const std::uint8_t* end() const { return data + size; }
  bool empty() const { return size == 0; }
};

template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  result(error e) : v_(std::in_place_index<1>, std::move(e)) {}
  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const error& err() const& { return std::get<1>(v_); }
  error&& err() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, error> v_;
};

// result<void>: empty on success.
class [[nodiscard]] status {
 public:
  status() = default;
  status(error e) : e_(std::move(e)), failed_(true) {}
  bool ok() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return ok(); }
  const error& err() const { return e_; }

 private:
  error e_;
  bool failed_ = false;
};

inline error make_error(errc code, std::string message) { return error{code, std::move(message)}; }

}  // namespace fatpack::core
