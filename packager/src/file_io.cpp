#include "file_io.hpp"

#include "cleanup.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fatpack::tool {
namespace {

core::error io_error(const std::string& path, const std::string& what) {
  return core::make_error(core::errc::io, path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

std::uint64_t max_input_size() {
  static const std::uint64_t limit = [] {
    const char* env = std::getenv("FATPACK_MAX_INPUT_SIZE");
    if (!env || !*env) return default_max_input_size;
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (errno != 0 || *end != '\0' || v == 0 || env[0] == '-') {
      std::fprintf(stderr, "fatpack: warning: FATPACK_MAX_INPUT_SIZE='%s' is not a positive byte count; using %llu\n",
                   env, static_cast<unsigned long long>(default_max_input_size));
      return default_max_input_size;
    }
    return std::uint64_t(v);
  }();
  return limit;
}

core::result<std::vector<std::uint8_t>> read_file(const std::string& path) {
  return read_file_bounded(path, max_input_size(), "the input size limit", "FATPACK_MAX_INPUT_SIZE");
}

core::result<std::vector<std::uint8_t>> read_file_bounded(const std::string& path, std::uint64_t limit,
                                                          const std::string& limit_name, const std::string& limit_source) {
  auto too_big = [&](const std::string& what) {
    return core::make_error(core::errc::io, path + ": " + what + " exceeds " + limit_name + " of " +
                                                std::to_string(limit) + " bytes (" + limit_source + ")");
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(path, "cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    auto e = io_error(path, "cannot stat");
    ::close(fd);
    return e;
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return core::make_error(core::errc::io, path + ": is a directory");
  }
  // A regular file's size is known before reading (a sparse 1 TiB file fails here, at once); a
  // device, FIFO or pipe has none, so the loop below stops at the limit too (/dev/zero never ends).
  if (S_ISREG(st.st_mode) && std::uint64_t(st.st_size) > limit) {
    ::close(fd);
    return too_big("its size (" + std::to_string(st.st_size) + " bytes)");
  }
  std::vector<std::uint8_t> bytes;
  try {
    if (S_ISREG(st.st_mode)) bytes.reserve(std::size_t(st.st_size));
    std::uint8_t buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        auto e = io_error(path, "read failed");
        ::close(fd);
        return e;
      }
      if (n == 0) break;
      if (bytes.size() + std::size_t(n) > limit) {
        ::close(fd);
        return too_big("the data read");
      }
      bytes.insert(bytes.end(), buf, buf + n);
    }
  } catch (const std::bad_alloc&) {
    ::close(fd);
    return core::make_error(core::errc::io, path + ": out of memory after reading " + std::to_string(bytes.size()) +
                                                " bytes");
  }
  ::close(fd);
  return bytes;
}

namespace {

// Writes every byte (retrying short writes and EINTR); false with errno set on failure.
bool write_all(int fd, core::byte_span bytes) {
  std::size_t done = 0;
  while (done < bytes.size) {
    const ssize_t n = ::write(fd, bytes.data + done, bytes.size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += std::size_t(n);
  }
  return true;
}

// The output is a regular file or does not exist: written only when its content changes, atomically.
core::status replace_regular_file(const std::string& path, core::byte_span bytes, bool* changed) {
  {
    auto existing = read_file(path);
    if (existing && existing->size() == bytes.size &&
        (bytes.size == 0 || std::memcmp(existing->data(), bytes.data, bytes.size) == 0))
      return {};
  }
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  std::string tmp = (slash == std::string::npos ? std::string() : dir) + "." +
                    path.substr(slash == std::string::npos ? 0 : slash + 1) + ".tmp.XXXXXX";
  std::vector<char> tmpl(tmp.begin(), tmp.end());
  tmpl.push_back('\0');
  const int fd = make_temp_file(tmpl.data());  // removed on a signal until forgotten below
  if (fd < 0) return io_error(path, "cannot create a temporary file in " + dir);
  tmp = tmpl.data();
  struct forget {
    const std::string& path;
    ~forget() { forget_temp_file(path); }
  } forget_tmp{tmp};
  auto fail = [&](const std::string& what) {
    auto e = io_error(path, what);
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  };
  if (!write_all(fd, bytes)) return fail("write failed");
  // mkstemp creates 0600; outputs are ordinary files, so honour the umask like any compiler.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) return fail("chmod failed");
  if (::fsync(fd) != 0) return fail("fsync failed");
  if (::close(fd) != 0) {
    auto e = io_error(path, "close failed");
    ::unlink(tmp.c_str());
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto e = io_error(path, "rename failed");
    ::unlink(tmp.c_str());
    return e;
  }
  if (changed) *changed = true;
  return {};
}

// A character device or FIFO named as the output (/dev/null, /dev/stdout on a pipe or terminal, a
// named pipe) is written to, never replaced: renaming over it would delete the device node (as root,
// /dev/null itself) or the link, and reading it first to compare could block for ever.
core::status write_stream(const std::string& path, core::byte_span bytes, bool* changed) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return io_error(path, "cannot open");
  if (!write_all(fd, bytes)) {
    auto e = io_error(path, "write failed");
    ::close(fd);
    return e;
  }
  if (::close(fd) != 0) return io_error(path, "close failed");
  if (changed) *changed = true;
  return {};
}

}  // namespace

core::status write_file_atomic(const std::string& path, core::byte_span bytes, bool* changed) {
  if (changed) *changed = false;
  struct stat target {};
  if (::stat(path.c_str(), &target) != 0) {
    if (errno != ENOENT) return io_error(path, "cannot stat");
    struct stat link {};
    if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
      return core::make_error(core::errc::io, path + ": is a symbolic link to a missing file; name the target itself");
    return replace_regular_file(path, bytes, changed);  // a new file
  }
  if (S_ISCHR(target.st_mode) || S_ISFIFO(target.st_mode)) return write_stream(path, bytes, changed);
  if (S_ISDIR(target.st_mode)) return core::make_error(core::errc::io, path + ": is a directory");
  if (!S_ISREG(target.st_mode))
    return core::make_error(core::errc::io, path + ": is neither a regular file, a character device nor a FIFO");
  // A symbolic link to a regular file: the file it names is replaced, the link stays.
  struct stat link {};
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    char* real = ::realpath(path.c_str(), nullptr);
    if (!real) return io_error(path, "cannot resolve the symbolic link");
    const std::string resolved = real;
    std::free(real);
    return replace_regular_file(resolved, bytes, changed);
  }
  return replace_regular_file(path, bytes, changed);
}

std::string input_named_by_output(const std::string& output, const std::vector<std::string>& inputs) {
  struct stat out{};
  if (::stat(output.c_str(), &out) != 0 || !S_ISREG(out.st_mode)) return {};  // a new file, or /dev/null
  for (const auto& in : inputs) {
    struct stat st{};
    if (::stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino) return in;
  }
  return {};
}

std::string safe_file_component(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    const bool keep = (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || c == '.' ||
                      c == '_' || c == '+' || c == '-';
    out += keep ? c : '_';
  }
  if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
  return out;
}

}  // namespace fatpack::tool
