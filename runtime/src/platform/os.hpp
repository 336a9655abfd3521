// The runtime's operating-system seam outside the cache (docs/design.md §7): loading a shared
// library, the loaded objects and their notes (embedded packages), mapping a file read-only, the
// environment, the process id, the platform. A Windows or macOS port replaces os_posix.cpp here, and the cache's own seam (cache/fs.hpp, fs_posix.cpp and the
// Boost mapping and file lock it lists); the rest of runtime/ is portable C++ (POSIX threads through
// <thread> aside, and the fork() handling in core's thread pool).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

// The objects loaded into this process (the program and its shared libraries), for the registry's
// embedded packages (registry.hpp). POSIX/ELF: dl_iterate_phdr; another OS puts its own walk here.
struct object_range {
  std::uintptr_t begin = 0, end = 0;  // [begin, end): a mapped, readable segment
};
struct object_note {
  std::uint32_t type = 0;
  const std::uint8_t* desc = nullptr;  // inside one of the object's segments
  std::size_t desc_size = 0;
};
struct loaded_object {
  std::uintptr_t base = 0;  // load bias (0 for a non-PIE program)
  std::string name;         // the loader's name for it ("" for the program)
  bool is_program = false;  // the program itself: never unloaded
  std::vector<object_range> segments;
  std::vector<object_note> notes;  // only the notes whose name is `note_name` of for_each_loaded_object
  // Whether [p, p + n) lies inside one segment.
  bool contains(const void* p, std::size_t n) const;
  // How many bytes from p to the end of its segment (0 when p is in none).
  std::size_t room(const void* p) const;
};
// How many objects the loader has loaded and unloaded so far (glibc's dlpi_adds / dlpi_subs); two
// equal values mean no object was loaded or unloaded in between. known: false where the loader does
// not count (then every call must walk).
struct load_counts {
  std::uint64_t adds = 0, subs = 0;
  bool known = false;
  bool operator==(const load_counts& o) const { return known && o.known && adds == o.adds && subs == o.subs; }
};
load_counts loaded_object_counts();
// Calls `fn` for each loaded object, with its notes named `note_name`. While `fn` runs, no object is
// unloaded (the loader's lock is held): `fn` may read any byte inside the segments it is given, and
// must not load or unload objects (no dlopen/dlclose). Returns the counts of this walk.
load_counts for_each_loaded_object(const char* note_name, const std::function<void(const loaded_object&)>& fn);
// A reference that keeps the object loaded as `name` at `base` loaded (dlopen RTLD_NOLOAD, so it never
// loads anything): the object is not unmapped, even by a dlclose elsewhere, until the last copy of the
// reference goes. Null when no object of that name is loaded at that base.
std::shared_ptr<const void> pin_loaded_object(const std::string& name, std::uintptr_t base);

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

// Reads a whole regular file, to its end (not to the size stat gives: a procfs file says 0 bytes),
// into owned memory, at most `max_size` bytes; on failure returns null
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

// Number of hardware threads (std::thread::hardware_concurrency, >= 1), read once per process.
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
