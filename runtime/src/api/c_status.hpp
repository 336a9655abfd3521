// The C API's errors, shared by the files that implement it (c_api.cpp, c_compile_api.cpp,
// port_api.cpp): the status code is returned and the message kept per thread for
// fatpack_last_error(); no C++ exception crosses the C API.
#pragma once

#include "fatpack/fatpack.h"
#include "fatpack/fatpack.hpp"

#include <exception>
#include <new>
#include <string>

namespace fatpack::detail::c_api {

// Sets this thread's message and CUDA status from `e`, or clears both when it is null (c_api.cpp).
void set_last_error(const fatpack::error* e);

// Success: clears this thread's message.
inline fatpack_status ok() {
  set_last_error(nullptr);
  return FATPACK_OK;
}
inline fatpack_status fail(const fatpack::error& e) {
  set_last_error(&e);
  return static_cast<fatpack_status>(e.code);
}
inline fatpack_status fail(fatpack::errc code, const std::string& message) {
  return fail(fatpack::error{code, 0, message, {}});
}

// Runs f, turning an escaping exception (bad_alloc, ...) into an error code.
template <class F>
fatpack_status guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const fatpack::exception& e) {
    return fail(e.error());
  } catch (const std::bad_alloc&) {
    return fail(fatpack::errc::cuda, "out of host memory");
  } catch (const std::exception& e) {
    return fail(fatpack::errc::invalid_argument, e.what());
  } catch (...) {
    return fail(fatpack::errc::invalid_argument, "unknown exception");
  }
}

}  // namespace fatpack::detail::c_api
