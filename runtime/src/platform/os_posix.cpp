// POSIX implementation of the OS seam (os.hpp): dlopen, the loaded objects (dl_iterate_phdr), mmap, whole-file reads, stat, hardware threads.
#include "platform/os.hpp"

#include "platform/build_id.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fatpack::detail::os {

library open_library(const std::string& path, std::string& why) {
  // A path names the very file dlopen maps (a bare name is searched by dlopen itself): a truncated
  // one (FATPACK_LIBCUDA, FATPACK_NVJITLINK, FATPACK_LIBNVRTC pointing at a copy cut short) is an
  // error here instead of SIGBUS inside the loader.
  if (path.find('/') != std::string::npos)
    if (std::string cut = elf_truncation(path); !cut.empty()) {
      why = path + ": " + cut;
      return library{nullptr};
    }
  dlerror();  // clear a stale message
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* msg = dlerror();
    why = msg ? msg : "dlopen failed";
  }
  return library{h};
}

void* find_symbol(const library& lib, const char* symbol) {
  if (!lib.handle) return nullptr;
  return ::dlsym(lib.handle, symbol);
}

bool loaded_object::contains(const void* p, std::size_t n) const {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (const auto& s : segments)
    if (a >= s.begin && a <= s.end && n <= s.end - a) return true;
  return false;
}

std::size_t loaded_object::room(const void* p) const {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (const auto& s : segments)
    if (a >= s.begin && a < s.end) return s.end - a;
  return 0;
}

namespace {

// Whether this loader's dl_phdr_info has the load/unload counters (glibc 2.4 and later, musl).
constexpr std::size_t counters_end = offsetof(dl_phdr_info, dlpi_subs) + sizeof(dl_phdr_info::dlpi_subs);

load_counts counts_of(const dl_phdr_info* info, std::size_t size) {
  load_counts c;
  if (size >= counters_end) {
    c.adds = info->dlpi_adds;
    c.subs = info->dlpi_subs;
    c.known = true;
  }
  return c;
}

// The notes named `name` in one PT_NOTE segment. Every size is checked against the segment: a
// malformed note ends the walk of that segment, it is never read past.
void collect_notes(std::uintptr_t begin, std::uintptr_t end, std::size_t align, const char* name,
                   std::vector<object_note>& out) {
  align = align == 8 ? 8 : 4;  // ELF notes are 4- or 8-byte aligned (p_align)
  const std::size_t name_len = std::strlen(name) + 1;
  auto round = [&](std::uint64_t n) { return (n + align - 1) / align * align; };
  std::uintptr_t p = begin;
  while (end - p >= 12) {
    std::uint32_t h[3];
    std::memcpy(h, reinterpret_cast<const void*>(p), sizeof h);
    const std::uint64_t name_room = round(h[0]), desc_room = round(h[1]);
    if (name_room > end - p - 12 || desc_room > end - p - 12 - name_room) return;
    const auto* n = reinterpret_cast<const char*>(p + 12);
    if (h[0] == name_len && std::memcmp(n, name, name_len) == 0)
      out.push_back({h[2], reinterpret_cast<const std::uint8_t*>(p + 12 + name_room), h[1]});
    p += 12 + name_room + desc_room;
  }
}

struct walk {
  const char* note_name;
  const std::function<void(const loaded_object&)>* fn;
  load_counts counts;
  bool first = true;
};

int walk_one(dl_phdr_info* info, std::size_t size, void* arg) {
  auto* w = static_cast<walk*>(arg);
  loaded_object o;
  o.base = info->dlpi_addr;
  o.name = info->dlpi_name ? info->dlpi_name : "";
  o.is_program = w->first;  // the loader reports the program first
  if (w->first) w->counts = counts_of(info, size);
  w->first = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const std::uintptr_t b = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_R) && ph.p_memsz) o.segments.push_back({b, b + ph.p_memsz});
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const std::uintptr_t b = info->dlpi_addr + ph.p_vaddr;
    // Only notes inside a loaded segment are read (a PT_NOTE outside every PT_LOAD is not mapped).
    if (ph.p_type == PT_NOTE && o.contains(reinterpret_cast<const void*>(b), ph.p_memsz))
      collect_notes(b, b + ph.p_memsz, ph.p_align, w->note_name, o.notes);
  }
  try {
    (*w->fn)(o);
  } catch (...) {
    return 1;  // an exception must not unwind through the loader (out of memory): stop the walk
  }
  return 0;
}

int counts_only(dl_phdr_info* info, std::size_t size, void* arg) {
  *static_cast<load_counts*>(arg) = counts_of(info, size);
  return 1;  // the first object is enough
}

class posix_mapping final : public mapped_file {
 public:
  posix_mapping(void* p, std::size_t n) : p_(p), n_(n) {}
  ~posix_mapping() override {
    if (p_ && n_) ::munmap(p_, n_);
  }
  const std::uint8_t* data() const override { return static_cast<const std::uint8_t*>(p_); }
  std::size_t size() const override { return n_; }

 private:
  void* p_;
  std::size_t n_;
};

}  // namespace

load_counts loaded_object_counts() {
  load_counts c;
  ::dl_iterate_phdr(counts_only, &c);
  return c;
}

load_counts for_each_loaded_object(const char* note_name, const std::function<void(const loaded_object&)>& fn) {
  walk w{note_name, &fn, {}, true};
  ::dl_iterate_phdr(walk_one, &w);
  return w.counts;
}

std::shared_ptr<const void> pin_loaded_object(const std::string& name, std::uintptr_t base) {
  if (name.empty()) return nullptr;
  void* h = ::dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (!h) return nullptr;
  link_map* lm = nullptr;
  if (::dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || lm->l_addr != base) {
    ::dlclose(h);
    return nullptr;
  }
  return std::shared_ptr<const void>(h, [](const void* p) { ::dlclose(const_cast<void*>(p)); });
}

std::shared_ptr<const mapped_file> map_file(const std::string& path, std::string& why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    why = std::strerror(errno);
    return nullptr;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    why = std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
    ::close(fd);
    return nullptr;
  }
  std::size_t n = static_cast<std::size_t>(st.st_size);
  void* p = nullptr;
  if (n > 0) {
    p = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      why = std::strerror(errno);
      ::close(fd);
      return nullptr;
    }
  }
  ::close(fd);  // the mapping keeps the file alive
  return std::make_shared<posix_mapping>(p, n);
}

std::shared_ptr<const std::vector<std::uint8_t>> read_file(const std::string& path, std::uint64_t max_size,
                                                           std::string& why) {
  // O_NONBLOCK: a FIFO at the path (planted, or swapped in after a caller's stat) would block this
  // open until a writer came; fstat then refuses it. A regular file's reads ignore the flag.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    why = std::strerror(errno);
    return nullptr;
  }
  auto fail = [&](std::string what) {
    why = std::move(what);
    ::close(fd);
    return nullptr;
  };
  struct stat st{};
  if (::fstat(fd, &st) != 0) return fail(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail("not a regular file");
  if (std::uint64_t(st.st_size) > max_size)
    return fail("is " + std::to_string(st.st_size) + " bytes, more than the limit of " + std::to_string(max_size));
  // Read to the end, not to the size fstat gave: what a reader after us (NVRTC, for a header the
  // include scan hashes) sees is everything up to EOF, and a file may say 0 bytes and hold more
  // (procfs, sysfs) or grow while it is read. One byte more than fstat's size finds EOF without a
  // second allocation; a file that is longer after all grows the buffer, up to max_size.
  auto bytes = std::make_shared<std::vector<std::uint8_t>>();
  auto grow_to = [&](std::uint64_t n) {
    try {
      bytes->resize(static_cast<std::size_t>(n));
      return true;
    } catch (const std::exception&) {
      return false;
    }
  };
  if (!grow_to(std::uint64_t(st.st_size) + 1))  // st_size <= max_size: checked above
    return fail("cannot allocate " + std::to_string(st.st_size) + " bytes");
  std::size_t got = 0;
  for (;;) {
    if (got == bytes->size()) {
      if (got > max_size) return fail("is more than the limit of " + std::to_string(max_size) + " bytes");
      if (!grow_to(std::min<std::uint64_t>(std::max<std::uint64_t>(2 * got, 4096), max_size + 1)))
        return fail("cannot allocate " + std::to_string(2 * got) + " bytes");
    }
    const ssize_t n = ::read(fd, bytes->data() + got, bytes->size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(std::strerror(errno));
    }
    if (n == 0) break;
    got += std::size_t(n);
  }
  bytes->resize(got);  // EOF came with got < the buffer's size <= max_size + 1
  ::close(fd);
  return bytes;
}

scratch_buffer::scratch_buffer(std::size_t size) : size_(size) {
  // Plain heap memory: an mmap(MAP_POPULATE) + munmap per load measured slower on the H200 VM
  // (lz4 1 MB entry: 1.87x a plain load vs 1.57x with the heap).
  p_ = new (std::nothrow) std::uint8_t[size ? size : 1];
}

scratch_buffer::~scratch_buffer() {
  if (mapped_)
    ::munmap(p_, size_);
  else
    delete[] p_;
}

bool is_tegra_platform() {
  struct stat st{};
  return ::stat("/etc/nv_tegra_release", &st) == 0;
}

int process_id() { return static_cast<int>(::getpid()); }

unsigned hardware_threads() {
  // Once per process: glibc reads /sys/devices/system/cpu/online on every call (open, read, close),
  // and a load asks several times (the JIT pool, the decode threads).
  static const unsigned n = [] {
    const unsigned c = std::thread::hardware_concurrency();
    return c ? c : 1u;
  }();
  return n;
}

const char* getenv(const char* name) { return std::getenv(name); }
const char* getenv_path(const char* name) { return ::secure_getenv(name); }

}  // namespace fatpack::detail::os
