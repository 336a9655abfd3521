// libFuzzer target: the cache index reader (runtime/src/cache/index.cpp, docs/cache.md §5). The
// index is a file other processes write; it is mapped, so the input goes into one temp file (on
// tmpfs where there is one: /dev/shm), rewritten for each input, which index_file::map() opens and
// maps by its path as it does index.v1 (a regular file, opened without following links).
// A mapped index must answer every read and survive writer operations (insert, touch, erase) on
// whatever its slots hold, never reading or writing outside the mapping.
#include "cache/index.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace {
struct temp_file {
  int fd = -1;
  std::string path;
};
const temp_file& file() {
  static const temp_file f = [] {
    temp_file t;
    t.path = std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/fatpack-fuzz-index-XXXXXX";
    t.fd = mkstemp(t.path.data());
    if (t.fd < 0) std::abort();
    static std::string to_remove = t.path;
    std::atexit([] { unlink(to_remove.c_str()); });
    return t;
  }();
  return f;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fatpack::detail::cache;
  const int fd = file().fd;
  if (ftruncate(fd, 0) != 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) std::abort();
  if (size && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  const std::string& path = file().path;
  std::string why;
  // Writable: the writer operations run on the fuzzed bytes too (under the index lock in the
  // product; here nobody else maps the file).
  auto idx = index_file::map(path, true, why);
  if (!idx) return 0;
  std::array<std::uint8_t, 16> code{};
  for (std::size_t i = 0; i < code.size() && i < size; ++i) code[i] = data[size - 1 - i];
  (void)idx->live_slots();
  (void)idx->damaged_slots();
  (void)idx->total_bytes();
  (void)idx->live();
  (void)idx->retired();
  (void)idx->last_clean_s();
  index_slot s;
  (void)idx->find(code, 1, &s);
  (void)idx->find_code(code);
  idx->touch(code, 1, 100);
  index_slot add;
  add.code = code;
  add.driver = 1;
  add.disk_bytes = 4096;
  (void)idx->insert(add);
  (void)idx->erase(code, 1);
  for (const auto& live : idx->live_slots()) {
    (void)idx->find(live.code, live.driver, nullptr);
    (void)idx->erase(live.code, live.driver);
    break;
  }
  return 0;
}
