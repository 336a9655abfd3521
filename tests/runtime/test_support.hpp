// Helpers for the runtime tests: real nvcc artifacts -> packages (through core's importer and
// writer, as the packager does), PTX rewrites, temp files, and child processes with a given
// environment (each driver configuration needs a fresh process).
#pragma once

#include "fatpack/core/input.hpp"
#include "fatpack/core/package_writer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <elf.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace fatpack_test {

// The build's test artifacts, or the copy the environment names (FATPACK_TEST_ARTIFACTS: .ci/security.sh
// copies them where the unprivileged user it runs the security test as can read them).
inline std::string artifact(const std::string& name) {
  const char* dir = std::getenv("FATPACK_TEST_ARTIFACTS");
  return std::string(dir && *dir ? dir : FATPACK_TEST_ARTIFACTS) + "/" + name;
}

inline std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot read " << path);
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Where a 64-bit ELF file's last loadable segment ends in the file (0 if it has none or is not one).
// A library "cut short" is cut before that: half the file would keep every segment of a build with
// debug information, whose sections after the segments make up most of the file.
inline std::size_t loadable_end(const std::string& elf) {
  Elf64_Ehdr eh;
  if (elf.size() < sizeof eh) return 0;
  std::memcpy(&eh, elf.data(), sizeof eh);
  std::size_t end = 0;
  for (std::size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    const std::size_t at = eh.e_phoff + i * sizeof ph;
    if (at + sizeof ph > elf.size()) return 0;
    std::memcpy(&ph, elf.data() + at, sizeof ph);
    if (ph.p_type == PT_LOAD) end = std::max<std::size_t>(end, ph.p_offset + ph.p_filesz);
  }
  return end;
}

inline void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A fresh directory for this test process.
// FATPACK_FULL=1: the full-size runs of the stress, crash and sweep suites (docs/reliability.md);
// CI runs their subsets.
inline bool full_run() {
  const char* v = std::getenv("FATPACK_FULL");
  return v && std::string(v) == "1";
}

inline const std::string& temp_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/fatpack-runtime-test-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (!d) std::abort();  // may run before doctest starts
    return std::string(d);
  }();
  return dir;
}

// PTX text with its `.version` line replaced ("9.0" -> isa).
inline std::vector<std::uint8_t> ptx_with_version(const std::vector<std::uint8_t>& ptx, const std::string& isa) {
  std::string s(ptx.begin(), ptx.end());
  auto pos = s.find(".version ");
  REQUIRE(pos != std::string::npos);
  auto end = s.find('\n', pos);
  s.replace(pos, end - pos, ".version " + isa);
  return std::vector<std::uint8_t>(s.begin(), s.end());
}

// Entries of a module from artifact files (cubin / PTX), imported as the packager does.
// An item is "file", "file@isa" (PTX with its .version rewritten) and/or "file#tag" (PTX with a
// comment line appended: the same kernels, different bytes, so a new JIT key).
inline std::vector<fatpack::core::entry_input> entries_of(const std::string& module, const std::vector<std::string>& items) {
  std::vector<fatpack::core::entry_input> out;
  for (const auto& item : items) {
    std::string file = item, isa, tag;
    if (auto hash = file.find('#'); hash != std::string::npos) {
      tag = file.substr(hash + 1);
      file = file.substr(0, hash);
    }
    if (auto at = file.find('@'); at != std::string::npos) {
      isa = file.substr(at + 1);
      file = file.substr(0, at);
    }
    auto bytes = read_file(artifact(file));
    if (!isa.empty()) bytes = ptx_with_version(bytes, isa);
    if (!tag.empty()) {
      std::string c = "// " + tag + "\n";
      bytes.insert(bytes.end(), c.begin(), c.end());
    }
    auto r = fatpack::core::import_input(fatpack::core::byte_span(bytes), item, module);
    REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? std::string() : r.error().message));
    for (auto& e : r.value()) {
      e.module_name = module;
      out.push_back(std::move(e));
    }
  }
  return out;
}

// rdc_kernel.cu + rdc_device.cu as a package of the module "rdc": the LTO-IR group (lto_90, real
// nvcc -ltoir -dlto output) and the relocatable PTX group (compute_90), as `fatpack build -- -rdc=true
// -dlto` packs them. The LTO-IR parts list the kernels of the same source's PTX.
inline std::vector<fatpack::core::entry_input> lto_and_ptx_groups() {
  auto ptx = entries_of("rdc", {"rdc_kernel.compute_90.rdc.ptx", "rdc_device.compute_90.rdc.ptx"});
  std::vector<fatpack::core::entry_input> out;
  const char* lto[] = {"rdc_kernel.lto_90.ltoir", "rdc_device.lto_90.ltoir"};
  for (std::size_t k = 0; k < 2; ++k) {
    fatpack::core::entry_input e;
    e.target = fatpack::core::target::parse("lto_90").value();
    e.module_name = "rdc";
    e.kernels = ptx[k].kernels;
    e.raw = read_file(artifact(lto[k]));
    e.link_part = std::uint16_t(k);
    e.link_parts = 2;
    out.push_back(std::move(e));
  }
  for (std::size_t k = 0; k < 2; ++k) {
    ptx[k].link_part = std::uint16_t(k);
    ptx[k].link_parts = 2;
    out.push_back(std::move(ptx[k]));
  }
  return out;
}


inline std::vector<std::uint8_t> make_package(const std::string& name,
                                              const std::vector<fatpack::core::entry_input>& entries,
                                              fatpack::core::codec codec = fatpack::core::codec::lz4) {
  fatpack::core::pack_options o;
  o.codec = codec;
  auto r = fatpack::core::write_package(name, entries, o);
  REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? std::string() : r.error().message));
  return std::move(r.value());
}

// Writes a package to the temp dir and returns its path.
inline std::string package_file(const std::string& name, const std::vector<fatpack::core::entry_input>& entries) {
  std::string path = temp_dir() + "/" + name + ".fpk";
  write_file(path, make_package(name, entries));
  return path;
}

struct child_result {
  int status = -1;
  std::string out, err;
  bool has(const std::string& s) const { return out.find(s) != std::string::npos; }
  bool err_has(const std::string& s) const { return err.find(s) != std::string::npos; }
};

// Runs `argv` with the current environment minus FAKECUDA_*/FATPACK_*/CUDA_*_PTX_JIT, plus `env`
// (plus FATPACK_CACHE_DISABLE=1 when `env` sets no FATPACK_CACHE_* variable, and FATPACK_JIT_PIECES=off
// when it does not set that).
inline child_result run_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
  static int counter = 0;
  std::string base = temp_dir() + "/child" + std::to_string(++counter);
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("FAKECUDA_", 0) == 0 || kv.rfind("FATPACK_", 0) == 0 || kv.rfind("CUDA_FORCE_PTX_JIT", 0) == 0 ||
        kv.rfind("CUDA_DISABLE_PTX_JIT", 0) == 0)
      continue;
    if (env.count(kv.substr(0, kv.find('=')))) continue;  // `env` sets it: its value, not a second entry
    envs.push_back(kv);
  }
  for (const auto& kv : env) envs.push_back(kv.first + "=" + kv.second);
  // The disk cache is on by default and would make JIT counts depend on earlier runs: off unless
  // the test configures it (tests/cache does).
  bool cache_configured = false;
  for (const auto& kv : env) cache_configured |= kv.first.rfind("FATPACK_CACHE_", 0) == 0;
  if (!cache_configured) envs.push_back("FATPACK_CACHE_DISABLE=1");
  // Whole-module loads (their JITs and entries are what these tests count) unless the test asks for
  // kernel-granular JIT (tests/runtime/pieces_test.cpp).
  if (!env.count("FATPACK_JIT_PIECES")) envs.push_back("FATPACK_JIT_PIECES=off");
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, (base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  int st = 0;
  waitpid(pid, &st, 0);
  child_result r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = read_text(base + ".out");
  r.err = read_text(base + ".err");
  return r;
}

inline int count_lines(const std::string& path) {
  std::string s = read_text(path);
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace fatpack_test
