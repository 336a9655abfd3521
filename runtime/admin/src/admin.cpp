// The administrative API (cache_admin.hpp): stats, list, verify, prune, clear.
#include "admin_impl.hpp"

#include "cache/config.hpp"
#include "cache/directory.hpp"
#include "cache/eviction.hpp"
#include "cache/fs.hpp"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <map>

namespace fatpack::detail::cache {

namespace {

// The header and key texts of an entry file (no payload).
bool read_head(const std::string& path, std::uint64_t size, entry_header& h, std::string& code_text,
               std::string& driver_text, std::string& problem) {
  fs& f = current_fs();
  int fd = -1;
  if (int e = open_regular(f, path, fd)) {
    problem = e == EINVAL ? "not a regular file" : errno_text(e);
    return false;
  }
  std::vector<std::uint8_t> head(std::min<std::uint64_t>(size, 64 * 1024 + 4096 + entry_header_size));
  std::size_t got = 0;
  int e = f.pread(fd, head.data(), head.size(), 0, got);
  f.close(fd);
  if (e) {
    problem = errno_text(e);
    return false;
  }
  if (auto bad = parse_header(core::byte_span(head.data(), got), size, h)) {
    problem = *bad;
    return false;
  }
  if (h.header_size + std::uint64_t(h.code_text_size) + h.driver_text_size > got) {
    problem = "key texts run past the header";
    return false;
  }
  code_text.assign(reinterpret_cast<const char*>(head.data() + h.header_size), h.code_text_size);
  driver_text.assign(reinterpret_cast<const char*>(head.data() + h.header_size + h.code_text_size), h.driver_text_size);
  return true;
}

// Adds `path` (not followed if a symlink) and, for a directory, what is under it, `depth` levels
// down at most (the cache is root/v1/objects/<ab>/<entry>: 4), to `s`'s directory totals.
void add_tree(fs& f, const std::string& path, int depth, disk_stats& s) {
  file_stat st;
  if (f.stat(path, st) != 0) return;  // gone meanwhile (evicted, renamed): not counted
  ++s.dir_items;
  s.dir_apparent_bytes += st.size;
  s.dir_allocated_bytes += st.allocated;
  if (!st.directory || depth == 0) return;
  std::vector<std::string> names;
  if (f.list_dir(path, names) != 0) return;
  for (const auto& n : names) add_tree(f, path + "/" + n, depth - 1, s);
}

}  // namespace

std::string default_cache_dir() { return default_user_dir(); }
bool parse_max_size(const std::string& text, std::uint64_t& out) { return parse_size(text, out); }
std::vector<std::string> environment_warnings() { return config_from_env().warnings; }

result<std::unique_ptr<admin>> admin::open(const std::string& dir, bool read_only) {
  if (dir.empty() || dir[0] != '/')
    return error{errc::invalid_argument, 0, "cache directory '" + dir + "' must be an absolute path", {}};
  const config cfg = config_from_env();
  fs& f = current_fs();
  file_stat st;
  if (read_only) {
    // A missing cache is an empty one; an existing one must pass the same ownership rules as a
    // prebuilt layer (ours, or root's; not writable by group/others) down to objects/. Its fan-out
    // directories are checked one by one by the scans below, which report the ones that break them.
    if (f.stat(format_dir(dir), st) == 0) {
      dir_verdict v = check_cache_dir_for_reading(dir);
      if (v.access == dir_access::refused) return error{errc::invalid_argument, 0, v.warning, {}};
    }
    // Entries are read, never mapped (here and below): the directory may be a prebuilt layer or on a
    // network file system, whose files may be rewritten in place (a mapping of a file that shrinks
    // faults with SIGBUS), and a check keeps no bytes that a mapping would save copying.
    // A tree root owns (a layer root installed), listed by another user, is read as the layer it is:
    // root's fan-out directories and entries are its own (as the runtime reads a prebuilt layer).
    file_stat os;
    const bool roots_layer = f.euid() != 0 && f.stat(format_dir(dir) + "/objects", os) == 0 && os.uid == 0;
    return std::unique_ptr<admin>(new admin_impl(
        cache_dir::open(dir, false, cfg.max_bytes, dir, roots_layer, entry_codec::stored, /*map_reads=*/false)));
  }
  dir_verdict v = prepare_user_dir(dir, false);
  if (v.access != dir_access::read_write)
    return error{errc::io, 0, v.warning.empty() ? dir + ": cannot be opened read-write" : v.warning, {}};
  return std::unique_ptr<admin>(
      new admin_impl(cache_dir::open(dir, true, cfg.max_bytes, dir, false, cfg.codec, /*map_reads=*/false)));
}

namespace {

// Why an entry whose code key text `ct` hashes to `code` and whose driver text to `driver` does not
// belong under the file name `slot` was parsed from ("" when it does): list and verify say the same.
std::string misfiled_problem(const decltype(index_slot::code)& code, std::uint64_t driver, const std::string& ct,
                             const index_slot& slot) {
  if (code == slot.code && driver == slot.driver) return {};
  return "entry holds another key than its file name says (" + describe_code_text(ct) + ")";
}

}  // namespace

disk_stats admin_impl::stats() {
  disk_stats s;
  s.path = d_->root();
  // Whether this user may write the cache, not whether this command opened it for writing (stats
  // only reads): access() also sees a read-only mount.
  s.writable = d_->writable() || ::access(d_->dir().c_str(), W_OK) == 0;
  s.max_bytes = d_->max_bytes();
  for (const auto& it : d_->scan()) {
    if (!it.st.regular) continue;  // a FIFO or link named like an entry is a stray (list, verify), not one
    if (it.temp) {
      ++s.temp_files;
      continue;
    }
    index_slot slot;
    if (!parse_file_name(it.name, slot.code, slot.driver)) continue;
    ++s.entries;
    s.bytes += it.st.size;
    entry_header h;
    std::string ct, dt, problem;
    if (read_head(it.path, it.st.size, h, ct, dt, problem)) s.cubin_bytes += h.cubin_size;
  }
  if (auto idx = d_->index()) {
    s.index_ok = true;
    s.index_bytes = idx->file_bytes();
    s.index_entries = idx->live();
    s.index_total_bytes = idx->total_bytes();
  }
  add_tree(current_fs(), s.path, 4, s);
  return s;
}

std::vector<entry_info> admin_impl::list(std::vector<entry_problem>* unreadable) {
  std::vector<entry_info> out;
  auto idx = d_->index();
  std::vector<cache_dir::stray_item> strays;
  for (const auto& it : d_->scan(&strays)) {
    if (it.temp) continue;
    index_slot slot;
    if (!parse_file_name(it.name, slot.code, slot.driver)) {
      if (unreadable) unreadable->push_back(entry_problem{it.path, "not a cache entry name", false});
      continue;
    }
    entry_header h;
    entry_info e;
    std::string problem;
    if (!read_head(it.path, it.st.size, h, e.code_text, e.driver_text, problem)) {
      if (unreadable) unreadable->push_back(entry_problem{it.path, problem, false});
      continue;
    }
    // Filed under another key's name: the runtime never serves it (verify says the same).
    if (std::string wrong = misfiled_problem(code_key_of_text(e.code_text).hash,
                                             XXH3_64bits(e.driver_text.data(), e.driver_text.size()), e.code_text, slot);
        !wrong.empty()) {
      if (unreadable) unreadable->push_back(entry_problem{it.path, std::move(wrong), false});
      continue;
    }
    e.file = it.path;
    e.code_key = core::hex_bytes(h.code_hash.data(), h.code_hash.size());
    driver_id d;
    d.hash = h.driver_hash;
    e.driver_id = d.hex();
    e.sm = sm_arch(h.sm);
    e.arch_specific = sm_variant(h.sm) == core::arch_variant::arch_specific;
    e.target = core::sm_name(e.sm, sm_variant(h.sm));
    e.cubin_bytes = h.cubin_size;
    e.disk_bytes = it.st.size;
    e.created_unix_s = h.created_unix_ns / 1000000000;
    switch (read_code_text(e.code_text, &e.code_name)) {
      case code_text_kind::ptx_jit: e.kind = "ptx-jit"; break;
      case code_text_kind::nvrtc_source: e.kind = "nvrtc-source"; break;
      case code_text_kind::nvrtc_ptx_jit: e.kind = "nvrtc-ptx-jit"; break;
      case code_text_kind::unknown: e.kind = "unknown"; break;
    }
    if (e.code_name.empty()) e.code_name = e.code_text;  // only fatpack::compile's keys are named
    index_slot found;
    if (idx && idx->find(slot.code, slot.driver, &found)) e.last_use_unix_s = found.last_use_s;
    out.push_back(std::move(e));
  }
  if (unreadable)
    for (auto& st : strays) unreadable->push_back(entry_problem{st.path, st.problem, false, st.directory});
  std::stable_sort(out.begin(), out.end(),
                   [](const entry_info& a, const entry_info& b) { return a.last_use_unix_s > b.last_use_unix_s; });
  return out;
}

// What is wrong with the entry file `it` ("" when it is a valid entry under its own name): read whole
// and checked as the runtime checks it; the key comes from the entry's own text and must hash to the
// name it has.
std::string admin_impl::entry_problem_of(const cache_dir::file_item& it) {
  index_slot slot;
  if (!parse_file_name(it.name, slot.code, slot.driver)) return "not a cache entry name";
  entry_header h;
  std::string ct, dt, problem;
  if (!read_head(it.path, it.st.size, h, ct, dt, problem)) return problem;
  code_key ck = code_key_of_text(ct);
  driver_id dk;
  dk.text = dt;
  dk.hash = XXH3_64bits(dt.data(), dt.size());
  if (std::string wrong = misfiled_problem(ck.hash, dk.hash, ct, slot); !wrong.empty()) return wrong;
  expected_key want{&ck, &dk, target_arch_of(ct)};
  sass_bytes cubin;
  std::string drv;
  read_status s = d_->read_entry(it.path, want, cubin, h, drv, problem);
  if (s != read_status::ok) return problem.empty() ? "unreadable" : problem;
  // The whole cubin walked too, as its writer walked it: a hit reads the SM from the ELF header
  // alone once the checksum matched (entry.cpp check_cubin), so verify is what would find an entry
  // whose header's a/f variant disagrees with the cubin's .nv.compat.
  const auto sm = cubin_sm_word(core::byte_span(cubin.data(), cubin.size()));
  if (!sm) return "the cubin's ELF structure cannot be read";
  if (*sm != h.sm) return "cubin's SM (ELF e_flags and .nv.compat) does not match the entry header";
  return {};
}

namespace {

// Removes `p.file` for --repair: true when it is gone; otherwise says why in the problem (a directory
// planted at an entry's name cannot be unlinked, and the repair that leaves it must not look done).
bool remove_for_repair(fs& f, entry_problem& p) {
  const int e = f.unlink(p.file);
  if (e == 0 || e == ENOENT) return true;
  p.problem += " (not removed: " + errno_text(e) + ")";
  return false;
}

}  // namespace

std::vector<entry_problem> admin_impl::verify(bool remove_bad) {
  std::vector<entry_problem> out;
  fs& f = current_fs();
  const bool rm = remove_bad && d_->writable();
  std::uint64_t bytes = 0, entries = 0;
  std::vector<cache_dir::stray_item> strays;
  for (const auto& it : d_->scan(&strays)) {
    entry_problem p;
    p.file = it.path;
    if (it.temp) {
      if (temp_writer_alive(it.path)) continue;  // being written right now
      p.problem = "stray temporary file (its writer died)";
      if (rm) p.removed = remove_for_repair(f, p);
      out.push_back(std::move(p));
      continue;
    }
    p.problem = entry_problem_of(it);
    if (p.problem.empty()) {
      ++entries;
      bytes += it.st.size;
      continue;
    }
    index_slot slot;
    if (rm && !parse_file_name(it.name, slot.code, slot.driver)) {
      p.removed = remove_for_repair(f, p);  // not an entry: no writer renames onto that name
    } else if (rm) {
      // As the runtime's quarantine: under the key's lock (a writer renaming a good entry into place
      // holds it), and only if it is still bad then.
      full_key k;
      k.code.hash = slot.code;
      k.driver.hash = slot.driver;
      if (auto kl = key_lock::try_acquire(d_->inflight_lock_path(), cache_dir::lock_hash(k))) {
        if (entry_problem_of(it).empty()) continue;  // replaced by a good entry meanwhile
        p.removed = remove_for_repair(f, p);
        if (p.removed)
          if (auto lock = d_->index_lock())
            if (auto idx = d_->index()) {
              std::string why;
              dir_lock_guard g(*lock, why);
              if (g.ok()) idx->erase(slot.code, slot.driver);
            }
      } else {
        p.problem += " (not removed: another process holds its key's lock, writing it; run --repair again)";
      }
    }
    out.push_back(std::move(p));
  }
  // Items of objects/ that are not the cache's fan-out directories. A symlink or file is removed by
  // --repair (unlink removes the link, never what it points to); a directory is reported only: the
  // fix (chmod, or removing what someone put there) is for a person to decide.
  for (auto& st : strays) {
    entry_problem p{st.path, st.problem, false};
    if (rm && !st.directory) p.removed = remove_for_repair(f, p);
    else if (rm) p.problem += " (not removed: a directory; chmod or remove it by hand)";
    out.push_back(std::move(p));
  }
  // The index: present, undamaged, and agreeing with the files.
  std::string ip = d_->index_problem();
  auto idx = d_->index();
  entry_problem ix;
  ix.file = d_->dir() + "/index.v1";
  if (!ip.empty() && !idx) {
    ix.problem = "index unusable: " + ip;
  } else if (idx) {
    std::uint64_t damaged = idx->damaged_slots();
    if (damaged) ix.problem = "index has " + std::to_string(damaged) + " damaged slots";
    else if (idx->live() != entries || idx->total_bytes() != bytes)
      ix.problem = "index lists " + std::to_string(idx->live()) + (idx->live() == 1 ? " entry / " : " entries / ") +
                   std::to_string(idx->total_bytes()) + " bytes, the directory holds " + std::to_string(entries) +
                   " / " + std::to_string(bytes);
  }
  if (!ix.problem.empty()) {
    if (rm) {
      std::string why;
      ix.removed = d_->rebuild_index(why, idx ? idx->capacity() : 0, true);
    }
    out.push_back(std::move(ix));
  }
  return out;
}

prune_result admin_impl::prune(std::uint64_t max_bytes) {
  prune_result r;
  if (!d_->writable()) return r;
  // Accounting first, so that entries the index missed are candidates too.
  std::string why;
  d_->rebuild_index(why, 0, true);
  evict_result e = evict_to(*d_, max_bytes, true);
  r.removed = e.removed;
  r.bytes_freed = e.bytes_freed;
  auto idx = d_->index();
  r.bytes_left = idx ? idx->total_bytes() : 0;
  clean_temp_files(*d_, 24 * 3600);
  return r;
}

status admin_impl::clear() {
  if (!d_->writable()) return error{errc::invalid_argument, 0, d_->root() + ": opened read-only", {}};
  fs& f = current_fs();
  std::string failed;
  for (const auto& it : d_->scan()) {
    // Entries and temp files only: another file someone put in a fan-out directory is not the
    // cache's to delete (before, clear unlinked every item; `verify --repair` handles strays).
    index_slot slot;
    if (!it.st.regular || !(it.temp || parse_file_name(it.name, slot.code, slot.driver))) continue;
    // A temp file whose writer is alive is spared: it is renamed into an entry in a moment (and the
    // writer then adds it to the index); deleting it under the writer only made its rename fail.
    if (it.temp && temp_writer_alive(it.path)) continue;
    if (int e = f.unlink(it.path); e && e != ENOENT && failed.empty()) failed = it.path + ": " + errno_text(e);
  }
  std::string why;
  if (!d_->rebuild_index(why, 0, true) && failed.empty()) failed = why;
  if (!failed.empty()) return error{errc::io, 0, "clearing " + d_->root() + ": " + failed, {}};
  return {};
}

}  // namespace fatpack::detail::cache
