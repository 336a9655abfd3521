// `fatpack cache push` (cache_admin.hpp): the local entries to a fleet cache, through the same
// store, envelope and signature code the runtime's remote layer uses (remote/).
#include "admin_impl.hpp"

#include "cache/entry.hpp"
#include "cache/fs.hpp"
#include "remote/remote_config.hpp"
#include "remote/remote_store.hpp"
#include "remote/signature.hpp"

#include <xxhash.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace fatpack::detail::cache {

namespace {

constexpr std::size_t max_problem_lines = 50;
constexpr unsigned push_threads = 8;

// The whole entry file, read once: what is validated is what is sent.
bool read_whole(const std::string& path, std::uint64_t size, std::vector<std::uint8_t>& out, std::string& why) {
  if (size > max_cubin_bytes + (64ull << 20)) {
    why = "larger than any entry can be";
    return false;
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    why = std::strerror(errno);
    return false;
  }
  out.resize(size);
  std::size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got != out.size()) {
    why = "shorter than its size (being replaced?)";
    return false;
  }
  return true;
}

// Validates an entry file's bytes completely and returns its key; "" problem when fine.
std::string check_entry(const std::string& name, const std::vector<std::uint8_t>& bytes, full_key& k) {
  std::array<std::uint8_t, 16> code{};
  std::uint64_t driver = 0;
  if (!parse_file_name(name, code, driver)) return "not a cache entry name";
  entry_header h;
  if (auto bad = parse_header(core::byte_span(bytes.data(), bytes.size()), bytes.size(), h)) return *bad;
  if (h.header_size + std::uint64_t(h.code_text_size) + h.driver_text_size > bytes.size())
    return "key texts run past the file";
  const char* texts = reinterpret_cast<const char*>(bytes.data() + h.header_size);
  k.code = code_key_of_text(std::string(texts, h.code_text_size));
  k.driver.text.assign(texts + h.code_text_size, h.driver_text_size);
  k.driver.hash = XXH3_64bits(k.driver.text.data(), k.driver.text.size());
  if (k.code.hash != code || k.driver.hash != driver) return "entry holds another key than its file name says";
  expected_key want{&k.code, &k.driver, target_arch_of(k.code.text)};
  std::string driver_text, problem;
  if (!decode_entry(core::byte_span(bytes.data(), bytes.size()), want, h, driver_text, problem))
    return problem.empty() ? "invalid" : problem;
  return {};
}

}  // namespace

std::string redact_remote_url(const std::string& url) { return remote::redact_url(url); }

result<push_result> push_entries(admin& a, const remote_settings& options) {
  auto& impl = static_cast<admin_impl&>(a);
  remote_cache_options o = to_options(options);
  o.read_write = true;
  remote::remote_config cfg = remote::config_from_options(o);
  if (cfg.store.url.empty()) return error{errc::invalid_argument, 0, "cache push: no remote URL", {}};
  if (!cfg.problems.empty()) return error{errc::invalid_argument, 0, "cache push: " + cfg.problems.front(), {}};
  std::string why;
  auto store = remote::open_store(cfg.store, why);
  if (!store) return error{errc::invalid_argument, 0, "cache push: " + why, {}};

  std::vector<cache_dir::file_item> items;
  for (auto& it : impl.dir().scan())
    if (!it.temp) items.push_back(std::move(it));

  push_result r;
  std::mutex mu;
  std::atomic<std::size_t> next{0};
  auto note = [&](std::uint64_t push_result::*counter, const std::string& line) {
    std::lock_guard<std::mutex> g(mu);
    ++(r.*counter);
    if (!line.empty() && r.problems.size() < max_problem_lines) r.problems.push_back(line);
  };
  auto work = [&] {
    for (std::size_t i; (i = next++) < items.size();) {
      const auto& it = items[i];
      std::vector<std::uint8_t> bytes;
      std::string problem;
      full_key k;
      if (!read_whole(it.path, it.st.size, bytes, problem) || !(problem = check_entry(it.name, bytes, k)).empty()) {
        note(&push_result::invalid, it.path + ": " + problem + " (not sent)");
        continue;
      }
      note(&push_result::entries, "");
      const std::string rkey = remote::remote_key(k);
      remote::reply rep = store->put_if_absent(rkey, remote::seal(rkey, bytes, cfg.key));
      if (rep.what == remote::outcome::stored) note(&push_result::uploaded, "");
      else if (rep.what == remote::outcome::exists) note(&push_result::present, "");
      else note(&push_result::failed, it.path + ": " + rep.message);
    }
  };
  std::vector<std::thread> pool;
  const unsigned n = std::min<unsigned>(push_threads, static_cast<unsigned>(std::max<std::size_t>(1, items.size())));
  for (unsigned t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return r;
}

}  // namespace fatpack::detail::cache
