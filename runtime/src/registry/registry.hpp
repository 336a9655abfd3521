// The registry: every package this process can load modules from.
//
// Sources, in the order they are searched:
//  - embedded packages, found three ways (core/registry_record.hpp): the `.note.fatpack` notes of
//    every loaded object (the program and its shared libraries), walked through the program headers
//    (os::for_each_loaded_object); the records between __start_/__stop_fatpack_registry of the
//    runtime's own link unit (weak + hidden); records passed to fatpack_register_embedded() by files
//    generated before the note existed. Records are deduplicated by address. Embedded bytes are
//    read in place.
//  - packages added through the API: a file (read into owned memory, at most max_package_file_size
//    bytes; never mapped, so rewriting it cannot crash the process), a memory buffer
//    (copied or borrowed), or a bare cubin / PTX / nvcc fatbin image that becomes a one-module package
//    (core::import_input + core::write_package with codec none).
//
// Which objects a runtime sees: its own, and every object that does not link a runtime of its own
// (the runtime's note, core::note_type_runtime). So a library with its own copy of the runtime keeps
// its packages to itself, and a library that only carries kernels serves the program's runtime.
//
// Loading and unloading: every call first asks the loader whether any object was loaded or unloaded
// since the last walk (os::loaded_object_counts, one step of dl_iterate_phdr); if so it walks again.
// A package whose object is gone is forgotten (and named in no_packages/not_found messages); a
// package found again at the same address with the same header (its tables' checksum covers every
// entry) keeps its identity, anything else there is a new package. All reads of an object's bytes
// during a walk happen inside the walk, where the loader cannot unmap anything, and stay inside the
// object's segments. Outside the walk the registry reads only what it copied (names, module lists).
// A package handed out (find_module, packages) from an object that can be unloaded (not the
// program, not the runtime's own object) carries a pin (os::pin_loaded_object): the object stays
// mapped until the last module handle or background compile using it is gone, even when the
// program dlclose()s it meanwhile (docs/runtime.md "Unloading").
//
// Policy: a package is validated (package_view::parse) when it is added; embedded packages are parsed
// when found and an invalid one is skipped with a warning (and named in "not found" errors). "0
// packages" is its own error (errc::no_packages) saying what was checked. The same bytes registered
// twice count once; a different package under a name already in use is refused.
#pragma once

#include "fatpack/core/package.hpp"
#include "fatpack/core/package_writer.hpp"
#include "fatpack/core/registry_record.hpp"
#include "fatpack/fatpack.hpp"
#include "platform/os.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace fatpack::detail {

// The largest package file add_package_file reads (4 GiB, as the CLI's default input limit).
inline constexpr std::uint64_t max_package_file_size = std::uint64_t(4) << 30;

struct registered_package {
  std::string name;
  std::string source;                  // "embedded", "embedded (registered)", path, "memory", "image"
  core::package_view view;             // views into the bytes kept alive by `keep`
  std::shared_ptr<const void> keep;    // owned copy (file, copied memory, image); null for embedded / borrowed bytes
  std::vector<std::string> modules;    // distinct module names, in entry order
  // The candidates of modules[i], in order: its entries except the later parts of a link group.
  std::vector<std::vector<std::size_t>> module_entries;
  std::array<std::uint8_t, core::header_size_v1> header{};  // the package's first bytes (zero-padded)
  bool embedded = false;               // found through a record (note, section or registered)
  // Written by this process (add_image) from bytes it hashed as it wrote them, and owned since:
  // the loader does not hash an uncompressed entry of it again.
  bool written_here = false;
  bool from_note = false;              // found through a note (walked again after loads/unloads)
  // Found through a record passed to fatpack_register_embedded() (not the runtime's own section):
  // its object is unknown, may be dlclose()d, and is not pinned.
  bool registered = false;
  // Found through a note of a loaded object that may be unloaded (not the program, not the
  // runtime's own object): handed out pinned.
  bool unloadable = false;
  std::string object;                  // the loaded object it came from (notes only; "" = the program)
  std::uintptr_t object_base = 0;
};
using package_ptr = std::shared_ptr<const registered_package>;

// A module found in the registry: its package and the indices of its entries there.
struct module_entries {
  package_ptr package;
  std::vector<std::size_t> entries;
};
// The candidates of `module` in `package`, in entry order: every entry of the module except the
// later parts of a link group, which its first part stands for (the JIT takes every part).
module_entries entries_of_module(const package_ptr& package, std::string_view module);

class registry {
 public:
  static registry& instance();

  status add_file(const std::string& path);
  status add_memory(const void* data, std::size_t size, std::string_view source, ownership own);
  // A cubin, PTX or nvcc fatbin packed (codec none) into a package of its own; a cubin's or PTX's
  // bytes are copied once, into that package. `compiled_here`: fatpack::compile's own code, whose
  // cubin may be for an SM the toolkit's table does not know (the JIT's SASS for a newer GPU, kept in
  // its source cache; core::import_input's unknown_sass_ok).
  status add_image(const void* data, std::size_t size, std::string_view module_name, std::string_view package_name,
                   bool compiled_here = false);
  // add_image for a cubin or PTX image that has writable room around it that the caller gives up
  // (`before` bytes before `data`, `after` after its end; fatpack::compile's mapped cache hit,
  // cache/fs.hpp map_read): the package is made around the bytes (its head written before them,
  // zeros after them up to a multiple of 64) instead of copying them, and `keep` keeps them for
  // the package's life. Too little room, or not one entry: add_image's copy. `checked_xxh3`: the
  // bytes' XXH3 where the caller checked it (not hashed again), else 0.
  status add_image_in_place(std::shared_ptr<const void> keep, std::uint8_t* data, std::size_t size, std::size_t before,
                            std::size_t after, std::string_view module_name, std::string_view package_name,
                            std::uint64_t checked_xxh3 = 0);
  // Queues an embedded record; parsed on first use. Safe during static initialisation.
  void add_record(const core::registry_record* record);

  // Every package (scans embedded records first). errc::no_packages when there are none.
  result<std::vector<package_ptr>> packages();
  // The entries of `module` in `package` (or in the one package that has it).
  result<module_entries> find_module(std::string_view module, std::string_view package);

 private:
  // add_image's second half: the imported entries packed (codec none) and registered.
  status add_imported(std::vector<core::entry_input> entries, const std::string& module, std::string_view package_name);
  // The last step of add_imported and add_image_in_place: `package`, which this process wrote from
  // bytes it hashed (or had checked) as it wrote it, registered with written_here set (the loader
  // does not hash its entries again); `keep` keeps its bytes.
  status add_written_here(core::byte_span package, const std::string& source, std::shared_ptr<const void> keep);
  registry() = default;
  // Brings the embedded packages up to date: the section and registered records once, then the
  // loaded objects' notes whenever the loader loaded or unloaded something.
  void refresh_locked();
  void scan_records_locked();
  void walk_objects_locked();
  result<module_entries> find_module_locked(std::string_view module, std::string_view package) const;
  // Adds all of `pkgs` or none; on a different package under a used name, errc::ambiguous and that
  // name in *conflict (when given).
  status add_parsed_locked(std::vector<package_ptr> pkgs, std::string* conflict = nullptr);
  // Why `name` is ambiguous ("" when it is not): an embedded package of that name was skipped because
  // a different one had it first. Looking a module up in such a package fails (errc::ambiguous): the
  // program may be asking for the skipped package's kernels.
  // A package skipped because another of its name and different bytes was registered first: why,
  // and the modules it held (a module only it had is ambiguous too, not "not found").
  struct name_conflict {
    std::string why;
    std::vector<std::string> modules;
  };
  using conflict_map = std::map<std::string, name_conflict>;  // package name -> the skipped one
  static void note_conflict(conflict_map& m, const std::string& name, const std::string& why,
                            const std::vector<std::string>& modules);
  const name_conflict* name_conflict_locked(const std::string& name) const;
  std::string no_packages_message() const;
  std::string skipped_list() const;

  mutable std::mutex mu_;
  std::vector<package_ptr> packages_;
  std::vector<const core::registry_record*> pending_;   // registered, not parsed yet
  std::vector<const void*> seen_records_;               // section and registered records taken
  std::vector<std::string> skipped_;                    // section/registered packages that did not validate
  conflict_map conflicts_;                              // section/registered packages skipped for their name
  std::size_t section_records_ = 0;                     // records found between __start_/__stop_
  bool scanned_section_ = false;
  // The last walk of the loaded objects.
  bool walked_ = false;
  os::load_counts counts_;
  std::size_t note_records_ = 0;                        // record notes found in objects this runtime sees
  std::size_t objects_walked_ = 0;
  std::vector<std::string> foreign_objects_;            // objects with kernels and their own runtime
  std::vector<std::string> note_skipped_;               // note packages that did not validate
  conflict_map note_conflicts_;                         // the same for note packages (rebuilt by each walk)
  // Packages forgotten because their object went, for messages: the last 8 distinct ones, each with
  // how often (a plugin loaded and unloaded in a loop is one entry, not one per unload).
  struct forgotten {
    std::string what;  // "'name' (from object)"
    std::size_t times = 0;
  };
  std::vector<forgotten> unloaded_;
  bool unloaded_dropped_ = false;  // some no longer listed (one that comes back counts from 1 again)
  std::string forgotten_list() const;
};

// Parses every package in `bytes` (core::for_each_package: back to back, a zero tail allowed).
result<std::vector<std::shared_ptr<registered_package>>> parse_all(core::byte_span bytes, const std::string& source,
                                                                  std::shared_ptr<const void> keep);

// An entry's target for messages: "sm_90", "sm_90a", "compute_80 (PTX ISA 9.0)".
std::string describe_target(const core::entry_info& e);

}  // namespace fatpack::detail
