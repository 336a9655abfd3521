// The include scan (include_scan.hpp).
#include "jit/include_scan.hpp"

#include "platform/os.hpp"

#include "fatpack/core/codec.hpp"
#include "fatpack/core/hex.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <set>

#include <sys/stat.h>

namespace fatpack::detail {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string dir_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash == 0 ? 1 : slash);
}

}  // namespace

std::string include_manifest::text() const {
  std::string t;
  for (const auto& f : files) t += f.path + "=" + f.state + "\n";
  return t;
}

std::vector<std::string> include_names(std::string_view text, std::size_t max_name) {
  std::vector<std::string> names;
  std::size_t p = 0;
  while (p < text.size()) {
    std::size_t end = text.find('\n', p);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(p, end - p);
    p = end + 1;
    std::size_t i = 0;
    while (i < line.size() && is_space(line[i])) ++i;
    if (i >= line.size() || line[i] != '#') continue;
    ++i;
    while (i < line.size() && is_space(line[i])) ++i;
    if (line.substr(i, 7) != "include") continue;
    i += 7;
    while (i < line.size() && is_space(line[i])) ++i;
    if (i >= line.size() || (line[i] != '"' && line[i] != '<')) continue;  // a macro include: not followed
    const char close = line[i] == '"' ? '"' : '>';
    const std::size_t stop = line.find(close, i + 1);
    if (stop == std::string_view::npos) continue;
    std::string_view name = line.substr(i + 1, stop - i - 1);
    if (name.empty() || name.size() > max_name || name.find('\0') != std::string_view::npos) continue;
    names.emplace_back(name);
  }
  return names;
}

include_manifest scan_includes(std::string_view source, const std::vector<std::pair<std::string, std::string>>& headers,
                               const std::vector<std::string>& include_paths, const include_limits& limits) {
  include_manifest m;
  std::set<std::string> given;
  for (const auto& h : headers) given.insert(h.first);
  std::set<std::string> seen_paths, seen_real;
  // Work: (text to scan, directory of the file it came from or "" for the caller's texts).
  struct pending {
    std::shared_ptr<const std::vector<std::uint8_t>> bytes;  // null: the caller's text below
    std::string_view text;
    std::string dir;
  };
  std::deque<pending> work;
  work.push_back({nullptr, source, {}});
  for (const auto& h : headers) work.push_back({nullptr, h.second, {}});
  std::uint64_t total = 0;
  auto stop = [&](std::string why) {
    m.complete = false;
    m.problem = std::move(why);
  };
  while (!work.empty() && m.complete) {
    pending item = std::move(work.front());
    work.pop_front();
    for (const std::string& name : include_names(item.text, limits.max_name_bytes)) {
      if (given.count(name)) continue;  // given as contents: its text is scanned and hashed already
      std::vector<std::string> dirs;
      if (!item.dir.empty()) dirs.push_back(item.dir);
      dirs.insert(dirs.end(), include_paths.begin(), include_paths.end());
      if (!name.empty() && name.front() == '/') dirs.assign(1, std::string());
      for (const auto& d : dirs) {
        std::string path = d.empty() ? name : d + "/" + name;
        if (!seen_paths.insert(path).second) continue;
        struct stat st{};
        if (::stat(path.c_str(), &st) != 0) {
          // Absent: the usual case (another include path has it, or NVRTC has it built in). A
          // symlink loop or a permission problem is recorded: if it changes, the key changes.
          if (errno == ENOENT || errno == ENOTDIR) continue;
          m.files.push_back({path, std::string("unreadable: ") + std::strerror(errno)});
          continue;
        }
        if (!S_ISREG(st.st_mode)) {
          if (!S_ISDIR(st.st_mode)) m.files.push_back({path, "not a regular file"});
          continue;
        }
        if (m.files.size() >= limits.max_files) {
          stop("more than " + std::to_string(limits.max_files) + " files reachable through #include");
          break;
        }
        if (std::uint64_t(st.st_size) > limits.max_file_bytes) {
          stop(path + " is " + std::to_string(st.st_size) + " bytes, more than the scan's limit of " +
               std::to_string(limits.max_file_bytes));
          break;
        }
        std::string why;
        auto bytes = os::read_file(path, limits.max_file_bytes, why);
        if (!bytes) {
          m.files.push_back({path, "unreadable: " + why});
          continue;
        }
        total += bytes->size();
        if (total > limits.max_total_bytes) {
          stop("more than " + std::to_string(limits.max_total_bytes) + " bytes reachable through #include");
          break;
        }
        m.files.push_back({path, core::hex16(core::xxh3(core::byte_span(bytes->data(), bytes->size()))) + ":" +
                                     std::to_string(bytes->size())});
        // Scan each real file once: include cycles and several names for one file end here.
        std::string real = path;
        if (char* r = ::realpath(path.c_str(), nullptr)) {
          real = r;
          std::free(r);
        }
        if (!seen_real.insert(real).second) continue;
        std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
        work.push_back({bytes, text, dir_of(path)});
      }
      if (!m.complete) break;
    }
  }
  return m;
}

}  // namespace fatpack::detail
