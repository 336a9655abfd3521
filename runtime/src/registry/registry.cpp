// The registry (see registry.hpp for the policy).
#include "registry/registry.hpp"

#include "platform/log.hpp"
#include "platform/os.hpp"

#include "fatpack/core/input.hpp"
#include "fatpack/export.h"
#include "fatpack/core/hex.hpp"
#include "fatpack/core/package_writer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

// Linker-made bounds of this link unit's `fatpack_registry` section. Weak: with no embedded package
// the section does not exist and both are null. Hidden: each shared library sees its own records.
extern "C" {
extern const fatpack::core::registry_record __start_fatpack_registry[] __attribute__((weak, visibility("hidden")));
extern const fatpack::core::registry_record __stop_fatpack_registry[] __attribute__((weak, visibility("hidden")));
}

// Default visibility (FATPACK_API): a program exports it to the shared libraries that register their
// embedded packages with the program's runtime. The one public entry point defined outside api/: it
// must sit in an object every program that uses the runtime links (this one), or an executable that
// never calls it itself would not export it (the linker pulls an archive member only when needed).
extern "C" FATPACK_API void fatpack_register_embedded(const void* record) {
  fatpack::detail::registry::instance().add_record(static_cast<const fatpack::core::registry_record*>(record));
}

namespace fatpack::detail {

namespace {

// Core's errors are the runtime's (one type): a core error about a package is a bad_package (or io)
// with its fault as the reason. An invalid_argument from core (a caller's mistake inside fatpack)
// still names a package problem here.
error from_core(const core::error& e) {
  error out = e;
  if (out.code == errc::invalid_argument) out.code = errc::bad_package;
  return out;
}

std::vector<std::string> module_names(const core::package_view& v) {
  std::vector<std::string> names;
  for (const auto& e : v.entries()) {
    std::string m(e.module_name);
    if (std::find(names.begin(), names.end(), m) == names.end()) names.push_back(std::move(m));
  }
  return names;
}

bool same_bytes(const registered_package& a, const registered_package& b) {
  auto x = a.view.bytes(), y = b.view.bytes();
  auto n = a.view.total_size();
  return n == b.view.total_size() && (x.data == y.data || std::memcmp(x.data, y.data, n) == 0);
}

}  // namespace

result<std::vector<std::shared_ptr<registered_package>>> parse_all(core::byte_span bytes, const std::string& source,
                                                                  std::shared_ptr<const void> keep) {
  std::vector<std::shared_ptr<registered_package>> out;
  if (bytes.size == 0) return error{errc::bad_package, 0, source + ": empty (no package)", {}};
  auto st = core::for_each_package(bytes, source, [&](core::package_view&& v) {
    auto p = std::make_shared<registered_package>();
    p->view = std::move(v);
    p->name = std::string(p->view.name());
    p->source = source;
    p->keep = keep;
    p->modules = module_names(p->view);
    out.push_back(std::move(p));
    return core::status{};
  });
  if (!st) return from_core(st.error());
  return out;
}

registry& registry::instance() {
  // Leaked: fatpack_register_embedded may run from any static constructor, and lookups may happen
  // from static destructors.
  static registry* r = new registry();
  return *r;
}

void registry::add_record(const core::registry_record* record) {
  if (!record) return;
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(record);
}

void registry::scan_embedded_locked() {
  if (!scanned_section_) {
    scanned_section_ = true;
    const core::registry_record* b = __start_fatpack_registry;
    const core::registry_record* e = __stop_fatpack_registry;
    if (b && e && e > b) {
      section_records_ = static_cast<std::size_t>(e - b);
      // Records registered explicitly come second: the section is this link unit's own view.
      std::vector<const core::registry_record*> recs;
      for (const auto* r = b; r != e; ++r) recs.push_back(r);
      pending_.insert(pending_.begin(), recs.begin(), recs.end());
    }
  }
  std::vector<const core::registry_record*> todo;
  todo.swap(pending_);
  for (const auto* rec : todo) {
    if (std::find(seen_records_.begin(), seen_records_.end(), rec) != seen_records_.end()) continue;
    seen_records_.push_back(rec);
    if (rec->magic != core::registry_record_magic || rec->version != core::registry_record_version) {
      skipped_.push_back("a registry record at " + core::hex(reinterpret_cast<std::uintptr_t>(rec)) +
                         " has magic/version " + core::hex(rec->magic) + "/" + std::to_string(rec->version) +
                         " (expected " + core::hex(core::registry_record_magic) + "/" +
                         std::to_string(core::registry_record_version) + "; rebuild with a matching fatpack)");
      log_line(log_level::warn, "skipped embedded package: " + skipped_.back());
      continue;
    }
    std::string name = rec->name ? rec->name : "?";
    if (!rec->begin || !rec->end || rec->end < rec->begin) {
      skipped_.push_back("embedded package '" + name + "': bad bounds");
      log_line(log_level::warn, "skipped " + skipped_.back());
      continue;
    }
    core::byte_span bytes(rec->begin, static_cast<std::size_t>(rec->end - rec->begin));
    auto parsed = parse_all(bytes, "embedded package '" + name + "'", nullptr);
    if (!parsed) {
      skipped_.push_back(parsed.error().message);
      log_line(log_level::warn, "skipped embedded package: " + parsed.error().message);
      continue;
    }
    for (auto& p : parsed.value()) p->source = "embedded";
    if (auto s = add_parsed_locked(std::move(parsed.value())); !s) {
      skipped_.push_back(s.error().message);
      log_line(log_level::warn, "skipped embedded package: " + s.error().message);
    }
  }
}

status registry::add_parsed_locked(std::vector<std::shared_ptr<registered_package>> pkgs) {
  // Check all before adding any: all-or-nothing.
  for (const auto& p : pkgs) {
    for (const auto& q : packages_) {
      if (q->name != p->name || same_bytes(*q, *p)) continue;
      return error{errc::ambiguous, 0,
                   std::string(p->view.source()) + ": a different package named '" + p->name +
                       "' is already registered (from " + q->source + ")",
                   {}};
    }
  }
  for (auto& p : pkgs) {
    bool dup = std::any_of(packages_.begin(), packages_.end(),
                           [&](const package_ptr& q) { return q->name == p->name && same_bytes(*q, *p); });
    if (dup) {
      log_line(log_level::debug, "package '" + p->name + "' from " + p->source + " is already registered");
      continue;
    }
    log_line(log_level::debug, "registered package '" + p->name + "' from " + p->source + " (" +
                                   std::to_string(p->view.entries().size()) + " entries)");
    packages_.push_back(std::move(p));
  }
  return {};
}

status registry::add_file(const std::string& path) {
  std::string why;
  // Read into owned memory, not mapped (docs/runtime.md): rewriting a mapped file in place would
  // kill this process with SIGBUS; a copy stays valid whatever happens to the file.
  auto owned = os::read_file(path, max_package_file_size, why);
  if (!owned) return error{errc::io, 0, "cannot read package " + path + ": " + why, {}};
  core::byte_span bytes(owned->data(), owned->size());
  auto parsed = parse_all(bytes, path, owned);
  if (!parsed) return parsed.error();
  std::lock_guard<std::mutex> lock(mu_);
  scan_embedded_locked();
  return add_parsed_locked(std::move(parsed.value()));
}

status registry::add_memory(const void* data, std::size_t size, std::string_view source, ownership own) {
  if (!data || size == 0) return error{errc::invalid_argument, 0, "add_package_memory: empty buffer", {}};
  std::shared_ptr<const void> keep;
  core::byte_span bytes(static_cast<const std::uint8_t*>(data), size);
  if (own == ownership::copy) {
    auto copy = std::make_shared<std::vector<std::uint8_t>>(bytes.begin(), bytes.end());
    bytes = core::byte_span(copy->data(), copy->size());
    keep = copy;
  }
  auto parsed = parse_all(bytes, std::string(source.empty() ? "memory" : source), keep);
  if (!parsed) return parsed.error();
  std::lock_guard<std::mutex> lock(mu_);
  scan_embedded_locked();
  return add_parsed_locked(std::move(parsed.value()));
}

status registry::add_image(const void* data, std::size_t size, std::string_view module_name,
                           std::string_view package_name) {
  if (!data || size == 0) return error{errc::invalid_argument, 0, "add_image: empty buffer", {}};
  if (module_name.empty()) return error{errc::invalid_argument, 0, "add_image: empty module name", {}};
  std::string module(module_name);
  std::string pkg_name = package_name.empty() ? module : std::string(package_name);
  std::string source = "image '" + module + "'";
  core::byte_span bytes(static_cast<const std::uint8_t*>(data), size);
  auto kind = core::detect_input(bytes);
  if (kind == core::input_kind::fatpack_package) return add_memory(data, size, source, ownership::copy);
  auto entries = core::import_input(bytes, source, module);
  if (!entries) return from_core(entries.error());
  for (auto& e : entries.value()) e.module_name = module;
  // Stored uncompressed: the bytes are already in memory, and "decompressing" is then one copy.
  core::pack_options opts;
  opts.codec = core::codec::none;
  auto pkg = core::write_package_lz4(pkg_name, entries.value(), opts);  // links no zstd encoder
  if (!pkg) return from_core(pkg.error());
  auto owned = std::make_shared<std::vector<std::uint8_t>>(std::move(pkg.value()));
  auto parsed = parse_all(core::byte_span(owned->data(), owned->size()), source, owned);
  if (!parsed) return parsed.error();
  for (auto& p : parsed.value()) p->source = source;
  std::lock_guard<std::mutex> lock(mu_);
  scan_embedded_locked();
  return add_parsed_locked(std::move(parsed.value()));
}

std::string registry::no_packages_message() const {
  const std::size_t records = seen_records_.size();
  const std::size_t registered = records - std::min(records, section_records_);
  if (records == 0 || skipped_.empty()) {
    // Nothing embedded reached the runtime: the records were not linked in.
    return "no fatpack packages are registered in this process (0 embedded records between "
           "__start_fatpack_registry and __stop_fatpack_registry, 0 registered through fatpack_register_embedded, 0 "
           "added through the API). If the kernels are embedded (fatpack_add_kernels or `fatpack embed`), the "
           "generated source must be linked into the executable or shared library itself: when it sits in a static "
           "library, the linker drops it unless that library is linked whole (CMake: "
           "$<LINK_LIBRARY:WHOLE_ARCHIVE,lib>, GNU ld: -Wl,--whole-archive). Otherwise add packages with "
           "fatpack::add_package_file / add_package_memory / add_image.";
  }
  // Records were linked in, but none held a usable package: linking is not the problem.
  std::string m = "no usable fatpack package in this process: " + std::to_string(records) + " embedded record" +
                  (records == 1 ? "" : "s") + " (" + std::to_string(section_records_) + " between __start_fatpack_registry and "
                  "__stop_fatpack_registry, " + std::to_string(registered) + " registered through "
                  "fatpack_register_embedded) were found and " + std::to_string(skipped_.size()) +
                  " skipped as invalid (a damaged package, or one from an incompatible fatpack: rebuild it with this "
                  "fatpack), and 0 packages were added through the API. Skipped:";
  for (const auto& sk : skipped_) m += " [" + sk + "]";
  return m;
}

result<std::vector<package_ptr>> registry::packages() {
  std::lock_guard<std::mutex> lock(mu_);
  scan_embedded_locked();
  if (packages_.empty()) return error{errc::no_packages, 0, no_packages_message(), {}};
  return packages_;
}

result<module_entries> registry::find_module(std::string_view module, std::string_view package) {
  std::lock_guard<std::mutex> lock(mu_);
  scan_embedded_locked();
  if (packages_.empty()) return error{errc::no_packages, 0, no_packages_message(), {}};
  std::vector<module_entries> found;
  bool package_seen = package.empty();
  for (const auto& p : packages_) {
    if (!package.empty() && p->name != package) continue;
    package_seen = true;
    module_entries me = entries_of_module(p, module);
    if (!me.entries.empty()) found.push_back(std::move(me));
  }
  if (found.size() == 1) return std::move(found.front());
  if (found.size() > 1) {
    std::string names;
    for (const auto& f : found) names += (names.empty() ? "" : ", ") + f.package->name;
    return error{errc::ambiguous, 0,
                 "module '" + std::string(module) + "' is in " + std::to_string(found.size()) + " packages (" + names +
                     "): name the package (load_options::package)",
                 {}};
  }
  std::string msg;
  if (!package_seen) {
    msg = "no package named '" + std::string(package) + "' is registered; registered:";
  } else {
    msg = "no module '" + std::string(module) + "'" + (package.empty() ? "" : " in package '" + std::string(package) + "'") +
          "; registered:";
  }
  for (const auto& p : packages_) {
    msg += " " + p->name + " [";
    for (std::size_t i = 0; i < p->modules.size(); ++i) msg += (i ? ", " : "") + p->modules[i];
    msg += "]";
  }
  if (!skipped_.empty()) {
    msg += "; skipped (invalid):";
    for (const auto& s : skipped_) msg += " [" + s + "]";
  }
  return error{errc::not_found, 0, std::move(msg), {}};
}

module_entries entries_of_module(const package_ptr& package, std::string_view module) {
  module_entries me;
  me.package = package;
  const auto& es = package->view.entries();
  for (std::size_t i = 0; i < es.size(); ++i)
    if (es[i].module_name == module && es[i].selectable()) me.entries.push_back(i);
  return me;
}

std::string describe_target(const core::entry_info& e) {
  std::string s = e.target.str();
  if (e.target.kind == core::entry_kind::ptx && e.ptx_isa.known()) s += " (PTX ISA " + e.ptx_isa.str() + ")";
  if (e.in_link_group()) s += " [" + std::to_string(e.link_parts) + " linked parts]";
  return s;
}

}  // namespace fatpack::detail
