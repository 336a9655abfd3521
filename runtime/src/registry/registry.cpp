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
#include <optional>
#include <unordered_set>

// This object links the runtime (core/registry_record.hpp): another copy of the runtime in the
// process leaves this object's packages to this one. In this file because every program that uses
// the runtime links it (the registry), and an SHT_NOTE survives --gc-sections.
asm(".pushsection .note.fatpack,\"a\",@note\n"
    ".balign 4\n"
    ".long 8, 0, 2\n"  // namesz (sizeof core::note_name), descsz, core::note_type_runtime
    ".asciz \"fatpack\"\n"
    ".popsection\n");
static_assert(sizeof fatpack::core::note_name == 8 && fatpack::core::note_type_runtime == 2,
              "the runtime's note above spells these out");

// Linker-made bounds of this link unit's `fatpack_registry` section. Weak: with no embedded package
// the section does not exist and both are null. Hidden: each shared library sees its own records.
extern "C" {
extern const fatpack::core::registry_record __start_fatpack_registry[] __attribute__((weak, visibility("hidden")));
extern const fatpack::core::registry_record __stop_fatpack_registry[] __attribute__((weak, visibility("hidden")));
}

// For files `fatpack embed` generated before the note existed: their constructors register records
// here. Default visibility (FATPACK_API): a program exports it to the shared libraries it links. Such
// records are used in place for the life of the process (no unloading: they predate it). The one
// public entry point defined outside api/: it
// must sit in an object every program that uses the runtime links (this one), or an executable that
// never calls it itself would not export it (the linker pulls an archive member only when needed).
extern "C" FATPACK_API void fatpack_register_embedded(const void* record) {
  fatpack::detail::registry::instance().add_record(static_cast<const fatpack::core::registry_record*>(record));
}

namespace fatpack::detail {

namespace {

// The modules of the packages named `name` in a group about to be skipped for that name.
template <class Group>
std::vector<std::string> modules_named(const Group& group, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& p : group)
    if (p->name == name) out.insert(out.end(), p->modules.begin(), p->modules.end());
  return out;
}

// Core's errors are the runtime's (one type): a core error about a package is a bad_package (or io)
// with its fault as the reason. An invalid_argument from core (a caller's mistake inside fatpack)
// still names a package problem here.
error from_core(const core::error& e) {
  error out = e;
  if (out.code == errc::invalid_argument) out.code = errc::bad_package;
  return out;
}

void index_modules(registered_package& p) {
  const auto& es = p.view.entries();
  for (std::size_t i = 0; i < es.size(); ++i) {
    // A link group is one candidate: its first part stands for it (the JIT takes every part).
    if (!es[i].selectable()) continue;
    auto it = std::find(p.modules.begin(), p.modules.end(), es[i].module_name);
    if (it == p.modules.end()) {
      p.modules.emplace_back(es[i].module_name);
      p.module_entries.emplace_back();
      it = p.modules.end() - 1;
    }
    p.module_entries[static_cast<std::size_t>(it - p.modules.begin())].push_back(i);
  }
  const auto b = p.view.bytes();
  std::memcpy(p.header.data(), b.data, std::min<std::size_t>(p.header.size(), p.view.total_size()));
}

// Whether two packages hold the same bytes. A package of an object that may be unloaded is compared
// by its header copy (the tables' checksum in it covers every entry's), so no byte of it is read
// here: the object may be going away in another thread.
bool same_bytes(const registered_package& a, const registered_package& b) {
  if (a.view.total_size() != b.view.total_size()) return false;
  if (a.unloadable || b.unloadable) return a.header == b.header;
  auto x = a.view.bytes(), y = b.view.bytes();
  return x.data == y.data || std::memcmp(x.data, y.data, a.view.total_size()) == 0;
}

// A package as handed out of the registry: one from an object that can be unloaded keeps it mapped
// (os::pin_loaded_object) as long as anything holds the pointer. Null when the object is no longer
// there, or something was unloaded since the walk that found it (it may be a different object now).
struct pinned_package {
  package_ptr package;
  std::shared_ptr<const void> pin;
};
package_ptr pin(const package_ptr& p, const os::load_counts& walked) {
  if (!p->unloadable) return p;
  auto h = os::pin_loaded_object(p->object, p->object_base);
  if (!h) return nullptr;
  if (walked.known) {
    const auto now = os::loaded_object_counts();
    if (!now.known || now.subs != walked.subs) return nullptr;
  }
  auto holder = std::make_shared<const pinned_package>(pinned_package{p, std::move(h)});
  return package_ptr(holder, p.get());
}

// How many attempts a lookup makes when objects are unloaded under it (each one walks again).
constexpr int pin_attempts = 3;

// The runtime's own object: the one whose segments hold this variable.
const char own_object_marker = 0;

std::string object_label(const os::loaded_object& o) { return o.name.empty() ? "the program" : o.name; }

// The loaded object a note package came from, for a message.
std::string object_label(const registered_package& p) { return p.object.empty() ? "the program" : p.object; }

// Where a registered package came from, for a message: a note package names its library (two
// libraries that carry packages of one name are the usual clash; "embedded" alone named neither).
std::string origin_of(const registered_package& p) { return p.from_note ? p.source + " in " + object_label(p) : p.source; }

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
    index_modules(*p);
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

void registry::scan_records_locked() {
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
  if (todo.empty()) return;
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
    const bool in_section = section_records_ && rec >= __start_fatpack_registry && rec < __stop_fatpack_registry;
    for (auto& p : parsed.value()) {
      p->source = "embedded";
      p->embedded = true;
      p->registered = !in_section;
    }
    std::string conflict;
    if (auto s = add_parsed_locked({parsed.value().begin(), parsed.value().end()}, &conflict); !s) {
      skipped_.push_back(s.error().message);
      if (!conflict.empty()) note_conflict(conflicts_, conflict, s.error().message, modules_named(parsed.value(), conflict));
      log_line(log_level::warn, "skipped embedded package: " + s.error().message);
    }
  }
}

// Runs inside the loader's walk (os::for_each_loaded_object): no object is unmapped meanwhile, and
// every read is checked against the object's segments first.
void registry::walk_objects_locked() {
  if (walked_ && os::loaded_object_counts() == counts_) return;
  std::vector<package_ptr> before;  // the note packages of the last walk
  for (const auto& p : packages_)
    if (p->from_note) before.push_back(p);
  std::vector<std::vector<package_ptr>> found;  // per record, in walk order
  std::vector<std::string> skipped, foreign;
  std::unordered_set<const void*> taken;  // a set: a library may carry any number of notes
  std::size_t records = 0, objects = 0;
  counts_ = os::for_each_loaded_object(core::note_name, [&](const os::loaded_object& obj) {
    ++objects;
    const bool own = obj.contains(&own_object_marker, 1);
    bool has_runtime = false, has_records = false;
    for (const auto& n : obj.notes) {
      has_runtime |= n.type == core::note_type_runtime;
      has_records |= n.type == core::note_type_record;
    }
    if (!has_records) return;
    const std::string where = object_label(obj);
    if (has_runtime && !own) {
      foreign.push_back(where);  // its own runtime sees these
      return;
    }
    for (const auto& n : obj.notes) {
      if (n.type != core::note_type_record) continue;
      ++records;
      if (n.desc_size != 8) {
        skipped.push_back("a fatpack note in " + where + " has a " + std::to_string(n.desc_size) +
                          "-byte descriptor (expected 8; rebuild with a matching fatpack)");
        continue;
      }
      std::int64_t distance = 0;
      std::memcpy(&distance, n.desc, sizeof distance);
      const auto* at = reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(n.desc) +
                                                     static_cast<std::uintptr_t>(distance));
      if (!obj.contains(at, sizeof(core::registry_record))) {
        skipped.push_back("a fatpack note in " + where + " points outside it");
        continue;
      }
      // The runtime's own link unit's section has it already, or another note points to it.
      if (std::find(seen_records_.begin(), seen_records_.end(), at) != seen_records_.end() ||
          !taken.insert(at).second)
        continue;
      core::registry_record rec;
      std::memcpy(&rec, at, sizeof rec);
      if (rec.magic != core::registry_record_magic || rec.version != core::registry_record_version) {
        skipped.push_back("a registry record in " + where + " has magic/version " + core::hex(rec.magic) + "/" +
                          std::to_string(rec.version) + " (expected " + core::hex(core::registry_record_magic) + "/" +
                          std::to_string(core::registry_record_version) + "; rebuild with a matching fatpack)");
        continue;
      }
      std::string name = "?";
      if (const std::size_t room = obj.room(rec.name); room) {
        const auto* nul = static_cast<const char*>(std::memchr(rec.name, 0, std::min<std::size_t>(room, 256)));
        if (nul) name = core::printable_text(std::string_view(rec.name, static_cast<std::size_t>(nul - rec.name)));
      }
      const std::string label = "embedded package '" + name + "' in " + where;
      if (!rec.begin || rec.end < rec.begin ||
          !obj.contains(rec.begin, static_cast<std::size_t>(rec.end - rec.begin))) {
        skipped.push_back(label + ": its bounds are not inside " + where);
        continue;
      }
      auto parsed = parse_all(core::byte_span(rec.begin, static_cast<std::size_t>(rec.end - rec.begin)), label, nullptr);
      if (!parsed) {
        skipped.push_back(parsed.error().message);
        continue;
      }
      std::vector<package_ptr> group;
      for (auto& p : parsed.value()) {
        p->source = "embedded";
        p->embedded = p->from_note = true;
        p->unloadable = !obj.is_program && !own;
        p->object = obj.name;
        p->object_base = obj.base;
        // The same object (name, base) with the same header at the same address: the package seen
        // before (its identity keys the module table), not a new one.
        auto same = std::find_if(before.begin(), before.end(), [&](const package_ptr& q) {
          return q->view.bytes().data == p->view.bytes().data && q->object == p->object &&
                 q->object_base == p->object_base && q->header == p->header;
        });
        group.push_back(same != before.end() ? *same : package_ptr(std::move(p)));
      }
      found.push_back(std::move(group));
    }
  });
  walked_ = true;
  objects_walked_ = objects;
  note_records_ = records;
  foreign_objects_ = std::move(foreign);
  // Rebuild: what did not come from a note stays, in its order; the note packages follow it.
  std::vector<package_ptr> kept;
  for (auto& p : packages_)
    if (!p->from_note) kept.push_back(std::move(p));
  packages_ = std::move(kept);
  note_conflicts_.clear();
  for (auto& group : found) {
    std::string conflict;
    if (auto st = add_parsed_locked(group, &conflict); !st) {
      skipped.push_back(st.error().message);
      if (!conflict.empty()) note_conflict(note_conflicts_, conflict, st.error().message, modules_named(group, conflict));
    }
  }
  for (const auto& p : before) {
    if (std::find(packages_.begin(), packages_.end(), p) != packages_.end()) continue;
    const std::string what = "'" + p->name + "' (from " + object_label(*p) + ")";
    log_line(log_level::info, "package " + what + " is gone: its object was unloaded");
    auto seen = std::find_if(unloaded_.begin(), unloaded_.end(), [&](const forgotten& f) { return f.what == what; });
    forgotten f{what, 1};
    if (seen != unloaded_.end()) {
      f.times = seen->times + 1;
      unloaded_.erase(seen);
    }
    unloaded_.push_back(std::move(f));  // the latest last
    if (unloaded_.size() > 8) {
      unloaded_.erase(unloaded_.begin());
      unloaded_dropped_ = true;
    }
  }
  for (const auto& sk : skipped) log_line(log_level::warn, "skipped embedded package: " + sk);
  note_skipped_ = std::move(skipped);
  // Embedded packages first (the section's and registered ones, then the notes'), then the API's.
  std::stable_partition(packages_.begin(), packages_.end(), [](const package_ptr& p) { return p->embedded; });
}

void registry::refresh_locked() {
  scan_records_locked();
  walk_objects_locked();
}
status registry::add_parsed_locked(std::vector<package_ptr> pkgs, std::string* conflict) {
  // Check all before adding any: all-or-nothing.
  for (const auto& p : pkgs) {
    for (const auto& q : packages_) {
      if (q->name != p->name || same_bytes(*q, *p)) continue;
      if (conflict) *conflict = p->name;
      return error{errc::ambiguous, 0,
                   std::string(p->view.source()) + ": a different package named '" + p->name +
                       "' is already registered (from " + origin_of(*q) + ")",
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
  log_deferral defer;  // refresh_locked logs; the lines go out after mu_ is released
  std::lock_guard<std::mutex> lock(mu_);
  refresh_locked();
  return add_parsed_locked({parsed.value().begin(), parsed.value().end()});
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
  log_deferral defer;  // refresh_locked logs; the lines go out after mu_ is released
  std::lock_guard<std::mutex> lock(mu_);
  refresh_locked();
  return add_parsed_locked({parsed.value().begin(), parsed.value().end()});
}

status registry::add_image(const void* data, std::size_t size, std::string_view module_name,
                           std::string_view package_name, bool compiled_here) {
  if (!data || size == 0) return error{errc::invalid_argument, 0, "add_image: empty buffer", {}};
  if (module_name.empty()) return error{errc::invalid_argument, 0, "add_image: empty module name", {}};
  core::byte_span bytes(static_cast<const std::uint8_t*>(data), size);
  const std::string module(module_name);
  const std::string source = "image '" + module + "'";
  if (core::detect_input(bytes) == core::input_kind::fatpack_package) return add_memory(data, size, source, ownership::copy);
  // Borrowed, not copied: add_imported packs them before this returns (one copy, into the package).
  auto entries = core::import_input(bytes, source, module, core::input_bytes::borrow, /*unknown_sass_ok=*/compiled_here);
  if (!entries) return from_core(entries.error());
  return add_imported(std::move(entries.value()), module, package_name);
}

status registry::add_image_in_place(std::shared_ptr<const void> keep, std::uint8_t* data, std::size_t size,
                                   std::size_t before, std::size_t after, std::string_view module_name,
                                   std::string_view package_name, std::uint64_t checked_xxh3) {
  if (!data || size == 0) return error{errc::invalid_argument, 0, "add_image: empty buffer", {}};
  if (module_name.empty()) return error{errc::invalid_argument, 0, "add_image: empty module name", {}};
  const core::byte_span bytes(data, size);
  const std::string module(module_name);
  const std::string source = "image '" + module + "'";
  auto entries = core::import_input(bytes, source, module, core::input_bytes::borrow, /*unknown_sass_ok=*/true);
  if (!entries) return from_core(entries.error());
  if (entries.value().size() != 1) return add_imported(std::move(entries.value()), module, package_name);
  core::entry_input& e = entries.value().front();
  e.module_name = module;
  e.known_xxh3 = checked_xxh3;
  auto head = core::write_package_head(package_name.empty() ? module : std::string(package_name), e);
  if (!head) return from_core(head.error());
  const std::size_t pad = (64 - size % 64) % 64;
  if (head.value().size() > before || pad > after) return add_imported(std::move(entries.value()), module, package_name);
  std::uint8_t* begin = data - head.value().size();
  std::memcpy(begin, head.value().data(), head.value().size());
  for (std::size_t i = 0; i < pad; ++i)
    if (data[size + i]) data[size + i] = 0;  // zeros already where the room is a mapping's last page
  entries.value().clear();
  return add_written_here(core::byte_span(begin, head.value().size() + size + pad), source, std::move(keep));
}

status registry::add_imported(std::vector<core::entry_input> entries, const std::string& module,
                              std::string_view package_name) {
  const std::string pkg_name = package_name.empty() ? module : std::string(package_name);
  const std::string source = "image '" + module + "'";
  for (auto& e : entries) e.module_name = module;
  // Stored uncompressed: the bytes are already in memory, and "decompressing" is then one copy.
  core::pack_options opts;
  opts.codec = core::codec::none;
  auto pkg = core::write_package_lz4(pkg_name, entries, opts);  // links no zstd encoder
  if (!pkg) return from_core(pkg.error());
  entries.clear();  // the package holds the bytes now
  auto owned = std::make_shared<std::vector<std::uint8_t>>(std::move(pkg.value()));
  return add_written_here(core::byte_span(owned->data(), owned->size()), source, owned);
}

status registry::add_written_here(core::byte_span package, const std::string& source, std::shared_ptr<const void> keep) {
  auto parsed = parse_all(package, source, std::move(keep));
  if (!parsed) return parsed.error();
  for (auto& p : parsed.value()) {
    p->source = source;
    p->written_here = true;
  }
  log_deferral defer;  // refresh_locked logs; the lines go out after mu_ is released
  std::lock_guard<std::mutex> lock(mu_);
  refresh_locked();
  return add_parsed_locked({parsed.value().begin(), parsed.value().end()});
}

// The first few skipped records, then how many more: a library with many notes that lie must not
// make every message (and each lookup that builds one) as large as all of them.
void registry::note_conflict(conflict_map& m, const std::string& name, const std::string& why,
                             const std::vector<std::string>& modules) {
  name_conflict& c = m[name];
  if (c.why.empty()) c.why = why;
  for (const auto& mod : modules)
    if (std::find(c.modules.begin(), c.modules.end(), mod) == c.modules.end()) c.modules.push_back(mod);
}

const registry::name_conflict* registry::name_conflict_locked(const std::string& name) const {
  for (const auto* m : {&conflicts_, &note_conflicts_})
    if (auto it = m->find(name); it != m->end()) return &it->second;
  return nullptr;
}

std::string registry::skipped_list() const {
  constexpr std::size_t shown = 8;
  std::string m;
  std::size_t n = 0;
  for (const auto* list : {&skipped_, &note_skipped_})
    for (const auto& sk : *list)
      if (n++ < shown) m += " [" + sk + "]";
  if (n > shown) m += " and " + std::to_string(n - shown) + " more";
  return m;
}

// What was checked, and what most likely went wrong.
std::string registry::no_packages_message() const {
  const std::size_t registered = seen_records_.size() - std::min(seen_records_.size(), section_records_);
  const std::size_t records = seen_records_.size() + note_records_;
  const std::size_t skipped = skipped_.size() + note_skipped_.size();
  std::string m = "no fatpack packages are registered in this process. Checked: " + std::to_string(note_records_) +
                  " package notes (.note.fatpack) in " + std::to_string(objects_walked_) + " loaded objects, " + std::to_string(section_records_) +
                  " records between __start_fatpack_registry and __stop_fatpack_registry of its own link unit, " +
                  std::to_string(registered) + " registered through fatpack_register_embedded, 0 added through the "
                  "API (add_package_file / add_package_memory / add_image)";
  if (!foreign_objects_.empty()) {
    m += "; not seen: the packages of";
    for (const auto& f : foreign_objects_) m += " " + f;
    m += " (each links its own fatpack runtime, which alone loads its packages)";
  }
  if (!unloaded_.empty())
    m += "; forgotten because the library holding them was unloaded (dlclose): " + forgotten_list();
  if (skipped) {
    m += "; " + std::to_string(skipped) + " of " + std::to_string(records) +
         " embedded records skipped as invalid (a damaged package, or one from an incompatible fatpack: rebuild it "
         "with this fatpack):" + skipped_list();
    return m + ".";
  }
  if (!unloaded_.empty() || !foreign_objects_.empty()) return m + ".";
  return m + ". Likely cause: the generated embedding source was not linked, or the library carrying it is not "
             "loaded. fatpack_add_kernels keeps it in executables, shared libraries and static libraries (an "
             "INTERFACE -Wl,-u); a link made without CMake must name the generated file itself, or keep a static "
             "library's member (-Wl,--whole-archive, or -Wl,-u,fatpack_pkg_<symbol>_record). Or add packages "
             "with fatpack::add_package_file / add_package_memory / add_image.";
}

result<module_entries> registry::find_module_locked(std::string_view module, std::string_view package) const {
  if (packages_.empty()) return error{errc::no_packages, 0, no_packages_message(), {}};
  std::vector<module_entries> found;
  bool package_seen = package.empty();
  for (const auto& p : packages_) {
    if (!package.empty() && p->name != package) continue;
    package_seen = true;
    // Owned copies only (registered_package::modules): no byte of an object that another thread may
    // be unloading is read here.
    for (std::size_t i = 0; i < p->modules.size(); ++i)
      if (p->modules[i] == module) found.push_back(module_entries{p, p->module_entries[i]});
  }
  auto ambiguous_name = [&](const std::string& name, const name_conflict& c) {
    return error{errc::ambiguous, 0,
                 "module '" + std::string(module) + "' of package '" + name +
                     "': that name belongs to two different packages in this process, and the second was "
                     "not registered (" + c.why + "); package names must be unique in one process "
                     "(fatpack_add_kernels NAME, fatpack pack --name)",
                 {}};
  };
  if (found.size() == 1) {
    if (const name_conflict* c = name_conflict_locked(found.front().package->name)) return ambiguous_name(found.front().package->name, *c);
    return std::move(found.front());
  }
  if (found.empty()) {
    // A module only the skipped package of a conflicted name had: ambiguous as well (before: "not
    // found", as if the library that holds it had no kernels).
    for (const auto* m : {&conflicts_, &note_conflicts_})
      for (const auto& [name, c] : *m)
        if ((package.empty() || package == name) &&
            std::find(c.modules.begin(), c.modules.end(), module) != c.modules.end())
          return ambiguous_name(name, c);
  }
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
  if (!skipped_.empty() || !note_skipped_.empty()) msg += "; skipped (invalid):" + skipped_list();
  if (!unloaded_.empty()) msg += "; forgotten (their library was unloaded): " + forgotten_list();
  if (!foreign_objects_.empty()) {
    msg += "; not looked into (each links its own fatpack runtime, which alone loads its packages):";
    for (const auto& f : foreign_objects_) msg += " " + f;
  }
  return error{errc::not_found, 0, std::move(msg), {}};
}

std::string registry::forgotten_list() const {
  std::string out;
  for (const auto& f : unloaded_)
    out += (out.empty() ? "" : ", ") + f.what + (f.times > 1 ? " " + std::to_string(f.times) + " times" : "");
  if (unloaded_dropped_) out += ", and older ones";
  return out;
}

module_entries entries_of_module(const package_ptr& package, std::string_view module) {
  module_entries me;
  me.package = package;
  for (std::size_t i = 0; i < package->modules.size(); ++i)
    if (package->modules[i] == module) me.entries = package->module_entries[i];
  return me;
}

result<std::vector<package_ptr>> registry::packages() {
  for (int attempt = 1;; ++attempt) {
    std::vector<package_ptr> all;
    os::load_counts walked;
    {
      log_deferral defer;  // refresh_locked logs; the lines go out after mu_ is released
      std::lock_guard<std::mutex> lock(mu_);
      refresh_locked();
      if (packages_.empty()) return error{errc::no_packages, 0, no_packages_message(), {}};
      all = packages_;
      walked = counts_;
    }
    // Pinned outside the lock: dlopen takes the loader's lock, which a library's constructor holds
    // while it may call into fatpack (and so wait for mu_).
    bool all_pinned = true;
    for (auto& p : all) {
      auto pinned = pin(p, walked);
      if (!pinned) {
        all_pinned = false;
        break;
      }
      p = std::move(pinned);
    }
    if (all_pinned || attempt == pin_attempts) {
      if (!all_pinned)
        all.erase(std::remove_if(all.begin(), all.end(), [&](const package_ptr& p) { return p->unloadable; }), all.end());
      return all;
    }
  }
}

result<module_entries> registry::find_module(std::string_view module, std::string_view package) {
  for (int attempt = 1;; ++attempt) {
    std::optional<result<module_entries>> found;
    os::load_counts walked;
    {
      log_deferral defer;  // refresh_locked logs; the lines go out after mu_ is released
      std::lock_guard<std::mutex> lock(mu_);
      refresh_locked();
      found.emplace(find_module_locked(module, package));
      walked = counts_;
    }
    if (!*found) return std::move(*found);
    module_entries me = std::move(found->value());
    if (auto pinned = pin(me.package, walked)) {
      me.package = std::move(pinned);
      return me;
    }
    if (attempt == pin_attempts)
      return error{errc::not_found, 0,
                   "package '" + me.package->name + "' (from " + me.package->object +
                       ") was unloaded while module '" + std::string(module) + "' was being looked up in it",
                   {}};
  }
}

std::string describe_target(const core::entry_info& e) {
  std::string s = e.target.str();
  if (e.target.kind == core::entry_kind::ptx && e.ptx_isa.known()) s += " (PTX ISA " + e.ptx_isa.str() + ")";
  if (e.in_link_group()) s += " [" + std::to_string(e.link_parts) + " linked parts]";
  return s;
}

}  // namespace fatpack::detail
