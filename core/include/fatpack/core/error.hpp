// Errors as values for fatpack's core (format, codecs, inputs, selection): the project's one error
// vocabulary (fatpack/error.hpp), spelled from core's side.
//
// Policy: nothing in core throws on bad input. Every function that can fail on input bytes returns
// result<T> (or status) whose error carries the fault (error::reason: truncated, checksum, ...; the
// code follows from it: bad_package, io or invalid_argument) and a message that names the file, the
// entry and the field, e.g.
//   "app.fpk: entry 3 (sm_90 sass): stored_size 12345 runs past the end of the package (9999 bytes)".
// Core never calls value() on a failed result (which throws fatpack::exception).
#pragma once

#include "fatpack/error.hpp"

#include <cstdint>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace fatpack::core {

// Core names faults; `errc::truncated` in core code is fatpack::fault::truncated.
using errc = fatpack::fault;
using fatpack::error;
using fatpack::result;
using fatpack::status;

inline const char* errc_name(errc f) noexcept { return fatpack::fault_name(f); }

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

inline error make_error(errc f, std::string message) { return error(f, std::move(message)); }

}  // namespace fatpack::core
