// The cache's file-system seam (docs/design.md §7): every OS call the cache makes outside the index's
// mmap goes through `fs`. Production uses the POSIX implementation (fs_posix.cpp); tests wrap it to
// inject errors (ENOSPC, EDQUOT, EROFS, EACCES, EIO, ENOLCK) at any call, and to pretend a directory
// is on NFS or the process is setuid. A port replaces fs_posix.cpp.
//
// Conventions: calls return 0 or an errno value (never throw); paths are absolute; every open through
// this seam is O_CLOEXEC | O_NOFOLLOW, so its descriptors never leak into a child the JIT may spawn
// and a symlink planted as a cache file is never followed (O_NOFOLLOW covers the last component only:
// a fan-out directory planted as a symlink is never written through, store.cpp, and an entry behind
// one, or behind a symlinked objects/, is read, not mapped). The index is opened through this seam too and
// then mmap-ed (index.cpp; the descriptor is closed once the mapping exists), and a large stored
// entry is mapped through map_read (store.cpp) instead of read; the directory locks
// (index.lock, evict.lock) are open-file-description locks on descriptors opened here (locks.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fatpack::detail::cache {

struct file_stat {
  bool regular = false;
  bool directory = false;
  bool symlink = false;    // stat (lstat) only: a descriptor opened through the seam is never one
  std::uint32_t mode = 0;  // permission bits (07777)
  std::uint32_t uid = 0;
  std::uint64_t size = 0;
  std::uint64_t allocated = 0;  // bytes the file system allocated (st_blocks * 512)
  std::uint64_t inode = 0;
  std::uint64_t device = 0;
  std::uint64_t links = 1;  // hard links (st_nlink)
  std::int64_t mtime_s = 0;
};

enum class open_mode {
  read,            // O_RDONLY | O_NONBLOCK (a FIFO or device at the path never blocks the open;
                   // the caller's fstat refuses it)
  create_new,      // O_WRONLY | O_CREAT | O_EXCL, mode 0600 (temp files)
  read_write,      // O_RDWR | O_CREAT, mode 0600 (lock files)
};

class fs {
 public:
  virtual ~fs() = default;
  virtual int open(const std::string& path, open_mode mode, int& fd) = 0;
  virtual void close(int fd) = 0;
  // Reads up to n bytes at off; `got` < n only at end of file.
  virtual int pread(int fd, void* buf, std::size_t n, std::uint64_t off, std::size_t& got) = 0;
  // Writes all n bytes at off (loops on short writes).
  virtual int pwrite(int fd, const void* buf, std::size_t n, std::uint64_t off) = 0;
  // Reserves blocks (posix_fallocate), so a full disk is ENOSPC here and not SIGBUS in a mapping.
  // EOPNOTSUPP/EINVAL where the file system cannot (callers go on).
  virtual int allocate(int fd, std::uint64_t size) = 0;
  virtual int fstat(int fd, file_stat& st) = 0;
  // Maps the first `size` bytes of an open regular file private and copy-on-write (a write changes
  // this process's copy of the page, never the file), after map_room bytes of anonymous memory:
  // 0 and `addr` (the file's first byte), or an errno (a file system that cannot map: the caller
  // reads instead). The room and the pages before a hit's cubin take the package header that
  // fatpack::compile writes there instead of copying the cubin (registry add_image_in_place).
  // Released with unmap_file, which goes to the OS directly: a mapping may outlive the seam that
  // made it (the JIT service keeps a hit's SASS for the process).
  virtual int map_read(int fd, std::uint64_t size, const void*& addr) = 0;
  // lstat (a symlink is neither regular nor a directory: `symlink` says it is one).
  virtual int stat(const std::string& path, file_stat& st) = 0;
  virtual int mkdir(const std::string& path, std::uint32_t mode) = 0;  // EEXIST when it exists
  virtual int chmod(const std::string& path, std::uint32_t mode) = 0;
  virtual int rename(const std::string& from, const std::string& to) = 0;
  virtual int unlink(const std::string& path) = 0;
  virtual int rmdir(const std::string& path) = 0;
  // Names in a directory, without "." and "..".
  virtual int list_dir(const std::string& path, std::vector<std::string>& names) = 0;
  // flock(LOCK_EX | LOCK_NB) on a descriptor: 0, or EWOULDBLOCK when another description holds it.
  // Marks a temp file's writer as alive (released by the kernel when the writer dies).
  virtual int try_flock(int fd) = 0;
  // Open-file-description byte-range write lock on one byte at `offset` (F_OFD_SETLK): 0, or EAGAIN
  // when another open file description holds it. Released on close or when the holder dies; two
  // descriptions conflict even inside one process (so threads exclude each other too).
  virtual int try_byte_lock(int fd, std::uint64_t offset) = 0;
  virtual int byte_unlock(int fd, std::uint64_t offset) = 0;
  // True for NFS/SMB/Lustre/other network file systems (statfs f_type), where locks and shared
  // mappings are not reliable.
  virtual bool network_fs(const std::string& path) = 0;
  virtual std::uint32_t euid() = 0;
  // The home directory of the effective user from the password database ("" if none).
  virtual std::string passwd_home() = 0;
  // setuid/setgid execution (AT_SECURE, or uid != euid / gid != egid).
  virtual bool privileged_exec() = 0;
  virtual std::int64_t now_unix_s() = 0;
  virtual std::int64_t now_unix_ns() = 0;
  virtual int pid() = 0;
};

// The seam in use (the POSIX one unless a test installed another; `nullptr` restores it). Not
// thread-safe against concurrent cache use: tests install it before opening a cache.
fs& current_fs();
void set_fs_for_testing(fs* f);
fs& posix_fs();

// The anonymous room map_read puts before a file's pages: address space only until written (a
// package head is a few hundred bytes to a few KB: one or two pages).
inline constexpr std::size_t map_room = 64 * 1024;

// The bytes after the end of a file of `file_size` bytes that its map_read mapping still covers: the
// rest of its last page, zeros that this process may write.
std::size_t map_tail_room(std::uint64_t file_size) noexcept;

// Releases a map_read mapping (munmap), its room included.
void unmap_file(const void* addr, std::uint64_t size) noexcept;

// A map_read mapping, released on destruction; move-only.
class mapped_file {
 public:
  mapped_file() = default;
  mapped_file(const void* addr, std::uint64_t size) : addr_(addr), size_(size) {}
  mapped_file(mapped_file&& o) noexcept : addr_(o.addr_), size_(o.size_) { o.addr_ = nullptr; }
  mapped_file& operator=(mapped_file&& o) noexcept {
    if (this != &o) {
      reset();
      addr_ = o.addr_;
      size_ = o.size_;
      o.addr_ = nullptr;
    }
    return *this;
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file() { reset(); }
  const std::uint8_t* data() const { return static_cast<const std::uint8_t*>(addr_); }
  std::uint64_t size() const { return size_; }

 private:
  void reset() noexcept {
    if (addr_) unmap_file(addr_, size_);
    addr_ = nullptr;
  }
  const void* addr_ = nullptr;
  std::uint64_t size_ = 0;
};

// Helpers over current_fs().
// Reads a whole small file (at most `limit` bytes).
int read_small_file(fs& f, const std::string& path, std::string& out, std::size_t limit = 1 << 20);
// Opens `path` (for reading unless `mode` says otherwise) and checks, on the descriptor (no window
// between a check and the open), that it is a regular file: EINVAL (descriptor closed) for a FIFO, a
// device, a directory.
int open_regular(fs& f, const std::string& path, int& fd, file_stat* st = nullptr, open_mode mode = open_mode::read);
// "<path>: <errno text>", with "not a regular file" for open_regular's EINVAL.
std::string open_problem(const std::string& path, int e);
// Creates every missing directory of `path` with `mode` (like mkdir -p).
int make_dirs(fs& f, const std::string& path, std::uint32_t mode);
// "No space left on device (ENOSPC)"
std::string errno_text(int e);

}  // namespace fatpack::detail::cache
