// The registry: every package this process can load modules from.
//
// Sources, in the order they are searched:
//  - embedded packages: the records `fatpack embed` places in the section `fatpack_registry`, walked
//    through the linker-made __start_/__stop_fatpack_registry of the link unit the runtime is in
//    (weak + hidden, so each shared library sees its own), plus records registered at static-init
//    time through fatpack_register_embedded() (how a shared library's packages reach a runtime
//    linked elsewhere). Records are deduplicated by address. Embedded bytes are read in place.
//  - packages added through the API: a file (read into owned memory, at most max_package_file_size
//    bytes; never mapped, so rewriting it cannot crash the process), a memory buffer
//    (copied or borrowed), or a bare cubin / PTX / nvcc fatbin image that becomes a one-module package
//    (core::import_input + core::write_package with codec none).
//
// Policy: a package is validated (package_view::parse) when it is added; embedded packages are parsed
// on first use and an invalid one is skipped with a warning (and named in "not found" errors). "0
// packages" is its own error (errc::no_packages) explaining how embedded packages get lost (a static
// library without WHOLE_ARCHIVE). The same bytes registered twice count once; a different package
// under a name already in use is refused.
#pragma once

#include "fatpack/core/package.hpp"
#include "fatpack/core/registry_record.hpp"
#include "fatpack/fatpack.hpp"

#include <cstdint>
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
  status add_image(const void* data, std::size_t size, std::string_view module_name, std::string_view package_name);
  // Queues an embedded record; parsed on first use. Safe during static initialisation.
  void add_record(const core::registry_record* record);

  // Every package (scans embedded records first). errc::no_packages when there are none.
  result<std::vector<package_ptr>> packages();
  // The entries of `module` in `package` (or in the one package that has it).
  result<module_entries> find_module(std::string_view module, std::string_view package);

 private:
  registry() = default;
  void scan_embedded_locked();
  status add_parsed_locked(std::vector<std::shared_ptr<registered_package>> pkgs);
  std::string no_packages_message() const;

  mutable std::mutex mu_;
  std::vector<package_ptr> packages_;
  std::vector<const core::registry_record*> pending_;   // registered, not parsed yet
  std::vector<const void*> seen_records_;
  std::vector<std::string> skipped_;                    // embedded packages that did not validate
  std::size_t section_records_ = 0;                     // records found between __start_/__stop_
  bool scanned_section_ = false;
};

// Parses every package in `bytes` (core::for_each_package: back to back, a zero tail allowed).
result<std::vector<std::shared_ptr<registered_package>>> parse_all(core::byte_span bytes, const std::string& source,
                                                                  std::shared_ptr<const void> keep);

// An entry's target for messages: "sm_90", "sm_90a", "compute_80 (PTX ISA 9.0)".
std::string describe_target(const core::entry_info& e);

}  // namespace fatpack::detail
