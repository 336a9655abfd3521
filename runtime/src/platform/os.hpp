// The runtime's operating-system seam outside the cache (docs/design.md §7): loading a shared
// library, mapping a file read-only, the environment, the process id, the platform. A Windows or
// macOS port replaces os_posix.cpp here, and the cache's own seam (cache/fs.hpp, fs_posix.cpp and the
// Boost mapping and file lock it lists); the rest of runtime/ is portable C++ (POSIX threads through
// <thread> aside, and the fork() handling in core's thread pool).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fatpack::detail::os {

// A shared library kept open for the life of the process (never closed: the driver must outlive
// every static object that may still call into it at exit).
struct library {
  void* handle = nullptr;
};

// Opens `path` (RTLD_NOW | RTLD_LOCAL). On failure returns a null handle and sets `why` to the
// loader's message (dlerror()).
library open_library(const std::string& path, std::string& why);
// The address of `symbol`, or null.
void* find_symbol(const library& lib, const char* symbol);

// A read-only mapping of a whole file; unmapped when the last owner goes away. Only for files
// their owner never rewrites in place (see read_file).
class mapped_file {
 public:
  virtual ~mapped_file() = default;
  virtual const std::uint8_t* data() const = 0;
  virtual std::size_t size() const = 0;
};
// Maps `path`; on failure returns null and sets `why` ("No such file or directory").
std::shared_ptr<const mapped_file> map_file(const std::string& path, std::string& why);

// Reads a whole regular file into owned memory, at most `max_size` bytes; on failure returns null
// and sets `why` ("No such file or directory", "is 5000000000 bytes, more than ..."). Packages are
// copied, not mapped: a mapped file rewritten in place (`cp` over it, an update) would kill the
// process with SIGBUS on the next read of a page past its new end.
std::shared_ptr<const std::vector<std::uint8_t>> read_file(const std::string& path, std::uint64_t max_size,
                                                           std::string& why);

// True on NVIDIA's Tegra/Jetson platforms (L4T writes /etc/nv_tegra_release), where SASS has no
// minor-version compatibility. Other integrated GPUs are not Tegra.
bool is_tegra_platform();

// A temporary buffer for one decompressed entry, freed on destruction. The seam where a faster
// allocation strategy goes (tried: mmap with MAP_POPULATE, slower on the H200 VM than the heap).
class scratch_buffer {
 public:
  explicit scratch_buffer(std::size_t size);
  ~scratch_buffer();
  scratch_buffer(const scratch_buffer&) = delete;
  scratch_buffer& operator=(const scratch_buffer&) = delete;
  std::uint8_t* data() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  std::uint8_t* p_ = nullptr;
  std::size_t size_ = 0;
  bool mapped_ = false;
};

// Number of hardware threads (>= 1).
unsigned hardware_threads();

// getpid(): compared with the pid that initialised CUDA to recognise a fork() child.
int process_id();

// The value of an environment variable, or null.
const char* getenv(const char* name);
// For variables that name a file or directory to load, read or write (FATPACK_LIBCUDA,
// FATPACK_NVJITLINK, FATPACK_CACHE_PATH, HOME, ...): secure_getenv semantics, i.e. null in a
// setuid/setgid process (or one with file capabilities), so the invoking user cannot make it load a
// library or use a directory of their choosing with the program's privileges.
const char* getenv_path(const char* name);

}  // namespace fatpack::detail::os
