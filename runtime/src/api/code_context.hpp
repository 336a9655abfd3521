// Where loaded code is used (typed launches, globals): the context a call must run in, and how
// errors name the code.
#pragma once

#include "load/loader.hpp"

#include <string>

namespace fatpack::detail {

// The context for using `s` from the calling thread: a module's own context (an error when it was
// destroyed: module_state::check_context); a library's kernels and globals in the calling thread's
// current context when that is on the library's device, else in the device's primary context
// (retained for the process, as a load does).
result<CUcontext> code_context(const module_state& s);

// "module 'm' (package 'p', sm_90) on device 0 (NVIDIA H200, CC 9.0), driver libcuda.so.1 (CUDA 13.0)"
std::string code_where(const module_state& s);

}  // namespace fatpack::detail
