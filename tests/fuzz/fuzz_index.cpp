// libFuzzer target: the cache index reader (runtime/src/cache/index.cpp, docs/cache.md §5). The
// index is a file other processes write; it is mapped, so the input goes into a memfd that
// index_file::map() maps through /proc/self/fd (the same stat + mapping path as a real index.v1).
// A mapped index must answer every read and survive writer operations (insert, touch, erase) on
// whatever its slots hold, never reading or writing outside the mapping.
#include "cache/index.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

namespace {
int memfd() {
  static const int fd = [] {
    const int f = memfd_create("fuzz-index", MFD_CLOEXEC);
    if (f < 0) std::abort();
    return f;
  }();
  return fd;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fatpack::detail::cache;
  const int fd = memfd();
  if (ftruncate(fd, 0) != 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) std::abort();
  if (size && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
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
