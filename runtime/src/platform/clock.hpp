// Timing for load reports: a monotonic stopwatch in milliseconds.
#pragma once

#include <chrono>

namespace fatpack::detail {

class stopwatch {
 public:
  stopwatch() : t0_(std::chrono::steady_clock::now()) {}
  double ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  }
  void restart() { t0_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace fatpack::detail
