// The implementation class behind cache_admin.hpp's `admin`, shared by admin.cpp and warm.cpp.
#pragma once

#include "fatpack/admin/cache_admin.hpp"
#include "cache/store.hpp"

#include "fatpack/fatpack.hpp"

namespace fatpack::detail::cache {

class admin_impl final : public admin {
 public:
  explicit admin_impl(std::shared_ptr<cache_dir> d) : d_(std::move(d)) {}
  const std::string& path() const override { return d_->root(); }
  disk_stats stats() override;
  std::vector<entry_info> list(std::vector<entry_problem>* unreadable = nullptr) override;
  std::vector<entry_problem> verify(bool remove_bad) override;
  prune_result prune(std::uint64_t max_bytes) override;
  status clear() override;
  cache_dir& dir() { return *d_; }
  const std::shared_ptr<cache_dir>& shared_dir() const { return d_; }

 private:
  std::string entry_problem_of(const cache_dir::file_item& it);
  std::shared_ptr<cache_dir> d_;
};

// The target CC a code key text names ("...|cc=90a|opt=..." -> 90), 0 when it names none: what the
// runtime checks an entry's cubin against, so verify and push refuse what a load would refuse.
inline std::uint32_t target_arch_of(const std::string& code_text) {
  const std::size_t at = code_text.find("|cc=");
  if (at == std::string::npos) return 0;
  std::uint32_t v = 0;
  for (std::size_t i = at + 4; i < code_text.size() && i < at + 10 && code_text[i] >= '0' && code_text[i] <= '9'; ++i)
    v = v * 10 + std::uint32_t(code_text[i] - '0');
  return v;
}

// The runtime's options for CLI settings.
inline remote_cache_options to_options(const remote_settings& r) {
  remote_cache_options o;
  o.url = r.url;
  o.read_write = r.read_write;
  o.key_file = r.key_file;
  o.trust_all_writers = r.trust_all_writers;
  o.connect_timeout_ms = r.connect_timeout_ms;
  o.timeout_ms = r.timeout_ms;
  o.credentials_file = r.credentials_file;
  o.ca_file = r.ca_file;
  return o;
}

}  // namespace fatpack::detail::cache
