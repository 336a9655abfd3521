// POSIX implementation of the cache's file-system seam (fs.hpp).
#include "cache/fs.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/auxv.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

namespace fatpack::detail::cache {

namespace {

void fill(const struct stat& s, file_stat& st) {
  st.regular = S_ISREG(s.st_mode);
  st.directory = S_ISDIR(s.st_mode);
  st.symlink = S_ISLNK(s.st_mode);
  st.mode = s.st_mode & 07777;
  st.uid = s.st_uid;
  st.size = static_cast<std::uint64_t>(s.st_size);
  st.allocated = static_cast<std::uint64_t>(s.st_blocks) * 512;  // st_blocks counts 512-byte units (POSIX)
  st.inode = s.st_ino;
  st.device = s.st_dev;
  st.links = static_cast<std::uint64_t>(s.st_nlink);
  st.mtime_s = s.st_mtime;
}

class posix final : public fs {
 public:
  int open(const std::string& path, open_mode mode, int& fd) override {
    int flags = O_CLOEXEC | O_NOFOLLOW;
    switch (mode) {
      // O_NONBLOCK: a FIFO planted at an entry path would block this open until a writer came
      // (every start hung); callers fstat the descriptor and refuse what is not a regular file.
      // It changes nothing for regular files.
      case open_mode::read: flags |= O_RDONLY | O_NONBLOCK; break;
      case open_mode::create_new: flags |= O_WRONLY | O_CREAT | O_EXCL; break;
      case open_mode::read_write: flags |= O_RDWR | O_CREAT; break;
    }
    do {
      fd = ::open(path.c_str(), flags, 0600);
    } while (fd < 0 && errno == EINTR);
    return fd < 0 ? errno : 0;
  }
  void close(int fd) override { ::close(fd); }
  int pread(int fd, void* buf, std::size_t n, std::uint64_t off, std::size_t& got) override {
    got = 0;
    auto* p = static_cast<char*>(buf);
    while (got < n) {
      ssize_t r = ::pread(fd, p + got, n - got, static_cast<off_t>(off + got));
      if (r < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    return 0;
  }
  int pwrite(int fd, const void* buf, std::size_t n, std::uint64_t off) override {
    auto* p = static_cast<const char*>(buf);
    std::size_t done = 0;
    while (done < n) {
      ssize_t r = ::pwrite(fd, p + done, n - done, static_cast<off_t>(off + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      if (r == 0) return EIO;
      done += static_cast<std::size_t>(r);
    }
    return 0;
  }
  int allocate(int fd, std::uint64_t size) override {
    if (size == 0) return 0;
    int e;
    do {
      e = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
    } while (e == EINTR);
    return e;
  }
  int fstat(int fd, file_stat& st) override {
    struct stat s{};
    if (::fstat(fd, &s) != 0) return errno;
    fill(s, st);
    return 0;
  }
  int map_read(int fd, std::uint64_t size, const void*& addr) override {
    if (size == 0 || size > static_cast<std::uint64_t>(SIZE_MAX) - map_room) return EINVAL;
    // The room and the file's pages in one reservation, so that they are contiguous.
    void* p = ::mmap(nullptr, map_room + static_cast<std::size_t>(size), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return errno;
    void* file = static_cast<std::uint8_t*>(p) + map_room;
    if (::mmap(file, static_cast<std::size_t>(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0) ==
        MAP_FAILED) {
      const int e = errno;
      ::munmap(p, map_room + static_cast<std::size_t>(size));
      return e;
    }
    addr = file;
    return 0;
  }
  int stat(const std::string& path, file_stat& st) override {
    struct stat s{};
    if (::lstat(path.c_str(), &s) != 0) return errno;
    fill(s, st);
    return 0;
  }
  int mkdir(const std::string& path, std::uint32_t mode) override {
    return ::mkdir(path.c_str(), static_cast<mode_t>(mode)) == 0 ? 0 : errno;
  }
  int chmod(const std::string& path, std::uint32_t mode) override {
    return ::chmod(path.c_str(), static_cast<mode_t>(mode)) == 0 ? 0 : errno;
  }
  int rename(const std::string& from, const std::string& to) override {
    return ::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
  }
  int unlink(const std::string& path) override { return ::unlink(path.c_str()) == 0 ? 0 : errno; }
  int rmdir(const std::string& path) override { return ::rmdir(path.c_str()) == 0 ? 0 : errno; }
  int list_dir(const std::string& path, std::vector<std::string>& names) override {
    names.clear();
    // O_NOFOLLOW: a directory planted as a symlink (objects/<ab> -> elsewhere) is never listed, so
    // nothing behind it is read, evicted or removed.
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    DIR* d = ::fdopendir(fd);
    if (!d) {
      const int e = errno;
      ::close(fd);
      return e;
    }
    while (struct dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      names.emplace_back(e->d_name);
    }
    ::closedir(d);
    return 0;
  }
  int try_flock(int fd) override {
    int r;
    do {
      r = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (r != 0 && errno == EINTR);
    return r == 0 ? 0 : errno;
  }
  int try_byte_lock(int fd, std::uint64_t offset) override { return ofd(fd, offset, F_WRLCK); }
  int byte_unlock(int fd, std::uint64_t offset) override { return ofd(fd, offset, F_UNLCK); }
  bool network_fs(const std::string& path) override {
    struct statfs s{};
    if (::statfs(path.c_str(), &s) != 0) return false;
    switch (static_cast<unsigned long>(s.f_type)) {
      case 0x6969ul:      // NFS
      case 0xFF534D42ul:  // CIFS
      case 0xFE534D42ul:  // SMB2
      case 0x517Bul:      // SMB
      case 0x0BD00BD0ul:  // Lustre
      case 0x47504653ul:  // GPFS
      case 0x65735546ul:  // FUSE (sshfs, ...): lock semantics unknown
      case 0x6B414653ul:  // AFS
      case 0x564c:        // NCP
        return true;
      default:
        return false;
    }
  }
  std::uint32_t euid() override { return ::geteuid(); }
  std::string passwd_home() override {
    struct passwd pw{};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) != 0 || !found || !found->pw_dir) return {};
    return found->pw_dir;
  }
  bool privileged_exec() override {
    return ::getauxval(AT_SECURE) != 0 || ::getuid() != ::geteuid() || ::getgid() != ::getegid();
  }
  std::int64_t now_unix_s() override {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  std::int64_t now_unix_ns() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int pid() override { return static_cast<int>(::getpid()); }

 private:
  static int ofd(int fd, std::uint64_t offset, short type, int cmd = F_OFD_SETLK) {
    struct flock l{};
    l.l_type = type;
    l.l_whence = SEEK_SET;
    l.l_start = static_cast<off_t>(offset);
    l.l_len = 1;
    l.l_pid = 0;  // required for OFD locks
    int r;
    do {
      r = ::fcntl(fd, cmd, &l);
    } while (r != 0 && errno == EINTR);
    if (r == 0) return 0;
    return errno == EACCES ? EAGAIN : errno;
  }
};

fs* g_override = nullptr;

}  // namespace

std::size_t map_tail_room(std::uint64_t file_size) noexcept {
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return page && file_size % page ? static_cast<std::size_t>(page - file_size % page) : 0;
}

void unmap_file(const void* addr, std::uint64_t size) noexcept {
  if (addr) ::munmap(const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(addr)) - map_room, map_room + static_cast<std::size_t>(size));
}

fs& posix_fs() {
  static posix* p = new posix();
  return *p;
}

fs& current_fs() { return g_override ? *g_override : posix_fs(); }
void set_fs_for_testing(fs* f) { g_override = f; }

int open_regular(fs& f, const std::string& path, int& fd, file_stat* st, open_mode mode) {
  if (int e = f.open(path, mode, fd)) return e;
  file_stat s;
  int e = f.fstat(fd, s);
  if (!e && !s.regular) e = EINVAL;
  if (e) {
    f.close(fd);
    fd = -1;
    return e;
  }
  if (st) *st = s;
  return 0;
}

std::string open_problem(const std::string& path, int e) {
  return path + ": " + (e == EINVAL ? std::string("not a regular file") : errno_text(e));
}

int read_small_file(fs& f, const std::string& path, std::string& out, std::size_t limit) {
  int fd = -1;
  if (int e = open_regular(f, path, fd)) return e;
  out.assign(limit, '\0');
  std::size_t got = 0;
  int e = f.pread(fd, out.data(), limit, 0, got);
  f.close(fd);
  out.resize(got);
  return e;
}

int make_dirs(fs& f, const std::string& path, std::uint32_t mode) {
  file_stat st;
  if (f.stat(path, st) == 0) return st.directory ? 0 : ENOTDIR;
  auto slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    if (int e = make_dirs(f, path.substr(0, slash), mode)) return e;
  }
  int e = f.mkdir(path, mode);
  return e == EEXIST ? 0 : e;
}

std::string errno_text(int e) {
  const char* name = "";
  switch (e) {
    case ENOSPC: name = "ENOSPC"; break;
    case EDQUOT: name = "EDQUOT"; break;
    case EROFS: name = "EROFS"; break;
    case EACCES: name = "EACCES"; break;
    case EPERM: name = "EPERM"; break;
    case EIO: name = "EIO"; break;
    case ENOLCK: name = "ENOLCK"; break;
    case ENOENT: name = "ENOENT"; break;
    case EEXIST: name = "EEXIST"; break;
    default: break;
  }
  std::string s = std::strerror(e);
  if (*name) s += std::string(" (") + name + ")";
  return s;
}

}  // namespace fatpack::detail::cache
