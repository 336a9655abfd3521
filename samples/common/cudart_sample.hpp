// What the cudart samples (runtime_api, cudart_library) add to sample.hpp: a CUDA runtime call's
// failure as a message. Included only by programs that link cudart.
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace sample {

// "cudaMalloc failed: cudaErrorMemoryAllocation: out of memory" into `message`; true when ok.
inline bool cudart_ok(cudaError_t e, const char* call, std::string& message) {
  if (e == cudaSuccess) return true;
  message = std::string(call) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  return false;
}

}  // namespace sample
