// Helpers for the cache tests: packages of M distinct PTX keys (each module's kernels renamed, so a
// cubin served under the wrong key is detected: its kernels do not resolve), child processes started
// without waiting (stress, kill -9), run as another user (permission cases when CI runs as root).
#pragma once

#include "../runtime/test_support.hpp"

#include <csignal>
#include <cstring>
#include <grp.h>
#include <sys/stat.h>

namespace cache_test {

using namespace fatpack_test;
using env_map = std::map<std::string, std::string>;

// PTX of vadd.compute_80.ptx with its kernels renamed to vadd_<tag> / saxpy_<tag>.
inline std::vector<std::uint8_t> renamed_ptx(const std::string& tag) {
  auto bytes = read_file(artifact("vadd.compute_80.ptx"));
  std::string s(bytes.begin(), bytes.end());
  for (const char* k : {"vadd", "saxpy"}) {
    std::string from = std::string(".entry ") + k + "(", to = std::string(".entry ") + k + "_" + tag + "(";
    auto pos = s.find(from);
    REQUIRE(pos != std::string::npos);
    s.replace(pos, from.size(), to);
  }
  return std::vector<std::uint8_t>(s.begin(), s.end());
}

// A package `name` with modules <name>_m0..<name>_m<M-1>, each one PTX entry of its own (one JIT key each).
inline std::string keys_package(const std::string& name, int m) {
  std::vector<fatpack::core::entry_input> entries;
  for (int i = 0; i < m; ++i) {
    auto ptx = renamed_ptx(name + "_" + std::to_string(i));
    const std::string module = name + "_m" + std::to_string(i);
    auto r = fatpack::core::import_input(fatpack::core::byte_span(ptx), module, module);
    REQUIRE(r.has_value());
    for (auto& e : r.value()) {
      e.module_name = module;
      entries.push_back(std::move(e));
    }
  }
  return package_file(name, entries);
}

// The probe and the fake driver: the build tree's, or the copies the environment names
// (.ci/security.sh copies them into a directory the unprivileged user it runs as can reach).
inline const char* probe_path() {
  const char* p = std::getenv("FATPACK_TEST_PROBE");
  return p && *p ? p : PROBE_PATH;
}
inline const char* fakecuda_path() {
  const char* p = std::getenv("FATPACK_TEST_FAKECUDA");
  return p && *p ? p : FAKECUDA_PATH;
}

inline std::string fresh_dir(const std::string& name) {
  std::string d = temp_dir() + "/" + name;
  std::string cmd = "rm -rf '" + d + "' && mkdir -p '" + d + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  return d;
}

// The cache suites count entries and JITs per module: whole-module loads unless a test asks for
// pieces (kernel-granular JIT, the default, has its own suite: tests/runtime/pieces_test.cpp).
inline env_map fake_env(env_map extra = {}) {
  env_map e{{"FATPACK_LIBCUDA", fakecuda_path()}, {"FAKECUDA_DEVICES", "90"}, {"FATPACK_JIT_PIECES", "off"}};
  for (auto& kv : extra) e[kv.first] = kv.second;
  return e;
}

inline child_result probe(const std::vector<std::string>& args, const env_map& env) {
  std::vector<std::string> argv{probe_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_child(argv, env);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

// The value of `key=` in the first line starting with `prefix` (-1 if absent).
inline long field(const std::string& out, const std::string& prefix, const std::string& key) {
  std::size_t pos = 0;
  while (pos < out.size()) {
    std::size_t nl = out.find('\n', pos);
    std::string line = out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    if (line.rfind(prefix, 0) == 0) {
      auto k = line.find(" " + key + "=");
      if (k == std::string::npos) return -1;
      return std::atol(line.c_str() + k + key.size() + 2);
    }
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return -1;
}

// A child started without waiting; stdout/stderr to files.
struct running {
  pid_t pid = -1;
  std::string out, err;
};

inline std::vector<std::string> child_env(const env_map& env) {
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("FAKECUDA_", 0) == 0 || kv.rfind("FATPACK_", 0) == 0) continue;
    envs.push_back(kv);
  }
  for (const auto& kv : env) envs.push_back(kv.first + "=" + kv.second);
  return envs;
}

// fork + exec; `uid` >= 0: drop to that uid/gid first (the parent must be root).
inline running start(const std::vector<std::string>& argv, const env_map& env, int uid = -1) {
  static int counter = 0;
  running r;
  std::string base = temp_dir() + "/bg" + std::to_string(++counter);
  r.out = base + ".out";
  r.err = base + ".err";
  std::vector<std::string> envs = child_env(env);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int o = ::open(r.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int e = ::open(r.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (o >= 0) dup2(o, 1);
    if (e >= 0) dup2(e, 2);
    if (uid >= 0) {
      if (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(uid)) != 0 || setuid(static_cast<uid_t>(uid)) != 0) _exit(126);
    }
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  r.pid = pid;
  return r;
}

inline child_result finish(const running& r) {
  int st = 0;
  waitpid(r.pid, &st, 0);
  child_result c;
  c.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  c.out = read_text(r.out);
  c.err = read_text(r.err);
  return c;
}

inline child_result run_as(int uid, const std::vector<std::string>& args, const env_map& env) {
  std::vector<std::string> argv{probe_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto c = finish(start(argv, env, uid));
  INFO("stdout:\n" << c.out << "\nstderr:\n" << c.err);
  return c;
}

// Files ending in `suffix` under dir (recursive).
inline std::vector<std::string> files_under(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  std::string cmd = "find '" + dir + "' -type f -name '*" + suffix + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[4096];
  while (fgets(line, sizeof line, p)) {
    std::string s(line);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    out.push_back(s);
  }
  pclose(p);
  return out;
}

inline std::uint64_t bytes_of(const std::vector<std::string>& files) {
  std::uint64_t n = 0;
  for (const auto& f : files) {
    struct stat st{};
    if (::stat(f.c_str(), &st) == 0) n += static_cast<std::uint64_t>(st.st_size);
  }
  return n;
}

}  // namespace cache_test
