// After repeated faults the remote is skipped for a while, by every process of the machine
// (docs/cache.md §12.5): a store that is down, hanging or refusing us costs each process at most a
// timeout or two, not one per kernel. The state lives in a small file in the per-user cache
// directory (v1/remote-<url hash>.state: consecutive faults and the time until which the remote
// is skipped), written by rename, read before each remote request; a process without a writable
// cache directory keeps it in memory. The file is advisory: garbage in it reads as "no faults".
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace fatpack::detail::remote {

class breaker {
 public:
  // `state_file` "" keeps the state in this process only.
  breaker(std::string state_file, int threshold, std::chrono::seconds cool_down);
  // Whether the remote should be skipped now (and until when: unix seconds).
  bool skipping(std::int64_t* until = nullptr);
  void fault();
  void success();
  const std::string& state_file() const { return file_; }

 private:
  struct state {
    int faults = 0;
    std::int64_t until = 0;
  };
  state read();
  void write(const state& s);
  std::string file_;
  int threshold_;
  std::chrono::seconds cool_;
  std::mutex mu_;
  state mem_;  // without a file
};

}  // namespace fatpack::detail::remote
