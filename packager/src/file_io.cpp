#include "file_io.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fatpack::tool {
namespace {

core::error io_error(const std::string& path, const std::string& what) {
  return core::make_error(core::errc::io, path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

core::result<std::vector<std::uint8_t>> read_file(const std::string& path) {
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
  std::vector<std::uint8_t> bytes;
  bytes.reserve(std::size_t(st.st_size));
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
    bytes.insert(bytes.end(), buf, buf + n);
  }
  ::close(fd);
  return bytes;
}

core::status write_file_atomic(const std::string& path, core::byte_span bytes, bool* changed) {
  if (changed) *changed = false;
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
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return io_error(path, "cannot create a temporary file in " + dir);
  tmp = tmpl.data();
  auto fail = [&](const std::string& what) {
    auto e = io_error(path, what);
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  };
  std::size_t done = 0;
  while (done < bytes.size) {
    const ssize_t n = ::write(fd, bytes.data + done, bytes.size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write failed");
    }
    done += std::size_t(n);
  }
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
