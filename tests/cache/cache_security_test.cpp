// Security of the cache tree as an unprivileged user (issue 10, "The suite"). Root ignores
// permissions, so these cases mean something only for a normal user: .ci/run creates one and runs
// this binary as that user; run as root, it says it skipped (exit 77). What a hostile neighbour or a
// planted file can do, each followed by a load that must still succeed with the right kernels:
// group/world-writable and foreign-owned directories (refused), symlinks at the root, at v1/, at
// objects/<ab> and at an entry (never followed, nothing behind them touched), a FIFO at an entry
// path (no hang), a valid entry copied under another key's name (never served), and a setuid copy of
// the probe (no disk cache, no path from the environment) when .ci/run could make one.
//
// Environment from .ci/run (each case that needs one says it skipped without it):
//   FATPACK_SEC_FOREIGN_DIR   a cache root (with v1/) owned by root, mode 0755
//   FATPACK_SEC_SETUID_PROBE  a setuid-root copy of fatpack_runtime_probe
#include "cache_support.hpp"

#include <sys/statvfs.h>
#include <algorithm>
#include <chrono>
#include <thread>

using namespace cache_test;

namespace {

const bool g_unprivileged = [] {
  if (geteuid() == 0) {
    std::printf("SKIPPED: the security tests need an unprivileged user (root ignores permissions); .ci/run runs them as one\n");
    std::exit(77);
  }
  return true;
}();

env_map env_for(const std::string& cache) {
  return fake_env({{"FATPACK_CACHE_PATH", cache}, {"FATPACK_LOG", "warn"}});
}

// Runs the probe with a deadline (a FIFO opened for reading blocks: a hang is a failure here).
child_result probe_bounded(const std::vector<std::string>& args, const env_map& env, int limit_s = 20) {
  std::vector<std::string> argv{probe_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  running r = start(argv, env);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  int st = 0;
  bool hung = false;
  while (waitpid(r.pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      hung = true;
      kill(r.pid, SIGKILL);
      waitpid(r.pid, &st, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  child_result c;
  c.status = hung ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  c.out = read_text(r.out);
  c.err = read_text(r.err);
  INFO("stdout:\n" << c.out << "\nstderr:\n" << c.err);
  return c;
}

void sh(const std::string& cmd) { REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd); }

// Loads every module: all right, none wrong.
void loads_right(const child_result& r, int m) {
  CHECK(r.status == 0);
  CHECK(field(r.out, "load-all", "wrong") == 0);
  CHECK(field(r.out, "load-all", "ok") == m);
}

}  // namespace

TEST_CASE("group- or world-writable and foreign-owned cache directories are refused; loads work") {
  const std::string pkg = keys_package("perm", 2), dir = fresh_dir("perm");
  for (const char* mode : {"777", "775", "757"}) {
    const std::string c = dir + "/mode" + mode;
    sh("mkdir -p '" + c + "/v1' && chmod 700 '" + c + "/v1' && chmod " + mode + " '" + c + "'");
    auto r = probe_bounded({"--package", pkg, "load-all", "cache-stats"}, env_for(c));
    loads_right(r, 2);
    CHECK(r.out.find("cache mode=memory-only") != std::string::npos);
    CHECK(r.err.find("writable by group or others") != std::string::npos);
    CHECK(files_under(c, ".fpc").empty());
  }
  const char* foreign = std::getenv("FATPACK_SEC_FOREIGN_DIR");
  if (!foreign) {
    MESSAGE("SKIPPED (foreign owner): FATPACK_SEC_FOREIGN_DIR is not set (.ci/run makes a root-owned cache root)");
  } else {
    auto r = probe_bounded({"--package", pkg, "load-all", "cache-stats"}, env_for(foreign));
    loads_right(r, 2);
    CHECK(r.out.find("cache mode=memory-only") != std::string::npos);
    CHECK(r.err.find("owned by uid 0") != std::string::npos);
  }
}

TEST_CASE("symlinks anywhere in the cache tree are never followed; what they point to is untouched") {
  const int m = 3;
  const std::string pkg = keys_package("link", m), dir = fresh_dir("link");
  // A victim directory and file a planted link points to: they must survive every case unchanged.
  sh("mkdir -p '" + dir + "/victim' && echo precious > '" + dir + "/victim/file' && chmod 700 '" + dir + "/victim'");
  auto victim_ok = [&] { return read_text(dir + "/victim/file") == "precious\n"; };
  // The root itself, and v1/, as symlinks to real, private directories.
  sh("mkdir -p '" + dir + "/real-root' && chmod 700 '" + dir + "/real-root' && ln -s '" + dir + "/real-root' '" + dir + "/root-link'");
  auto r = probe_bounded({"--package", pkg, "load-all", "cache-stats"}, env_for(dir + "/root-link"));
  loads_right(r, m);
  CHECK(r.out.find("cache mode=memory-only") != std::string::npos);
  CHECK(files_under(dir + "/real-root", ".fpc").empty());
  sh("mkdir -p '" + dir + "/v1root' '" + dir + "/v1real' && chmod 700 '" + dir + "/v1root' '" + dir + "/v1real' && ln -s '" + dir +
     "/v1real' '" + dir + "/v1root/v1'");
  r = probe_bounded({"--package", pkg, "load-all", "cache-stats"}, env_for(dir + "/v1root"));
  loads_right(r, m);
  CHECK(files_under(dir + "/v1real", ".fpc").empty());
  // A used cache whose entry is replaced by a link to the victim file: a miss, compiled again.
  const std::string c = dir + "/cache";
  loads_right(probe_bounded({"--package", pkg, "load-all", "cache-wait"}, env_for(c)), m);
  auto entries = files_under(c, ".fpc");
  REQUIRE(entries.size() == static_cast<std::size_t>(m));
  sh("rm -f '" + entries[0] + "' && ln -s '" + dir + "/victim/file' '" + entries[0] + "'");
  r = probe_bounded({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, env_for(c));
  loads_right(r, m);
  CHECK(victim_ok());
}

// cache_dir::write created its temp file in objects/<ab> and renamed it there without checking that
// objects/<ab> is a real directory: O_NOFOLLOW covers only the last path component, so a symlink
// planted as objects/<ab> made every writer of that fan-out write its entries wherever the link
// pointed. Now the store refuses such a directory (the load compiles and goes on).
TEST_CASE("a symlink planted as objects/<ab> is never written through") {
  const int m = 2;
  const std::string pkg = keys_package("fanlink", m), dir = fresh_dir("fanlink"), c = dir + "/cache";
  sh("mkdir -p '" + dir + "/victim' && chmod 700 '" + dir + "/victim'");
  loads_right(probe_bounded({"--package", pkg, "load-all", "cache-wait"}, env_for(c)), m);
  auto entries = files_under(c, ".fpc");
  REQUIRE(entries.size() == static_cast<std::size_t>(m));
  const std::string fan = entries[0].substr(0, entries[0].rfind('/'));
  sh("rm -rf '" + fan + "' && ln -s '" + dir + "/victim' '" + fan + "'");
  auto r = probe_bounded({"--package", pkg, "load-all", "cache-wait"}, env_for(c));
  loads_right(r, m);
  CHECK(files_under(dir + "/victim", ".fpc").empty());  // nothing may be written through the link
}

TEST_CASE("a FIFO at an entry path never hangs a load; a valid entry under another key is never served") {
  const int m = 3;
  const std::string pkg = keys_package("fifo", m), dir = fresh_dir("fifo"), c = dir + "/cache";
  loads_right(probe_bounded({"--package", pkg, "load-all", "cache-wait"}, env_for(c)), m);
  auto entries = files_under(c, ".fpc");
  REQUIRE(entries.size() == static_cast<std::size_t>(m));
  std::sort(entries.begin(), entries.end());
  // Entry 0 becomes a FIFO (nobody writes it: opening it for reading would block forever).
  sh("rm -f '" + entries[0] + "' && mkfifo -m 600 '" + entries[0] + "'");
  // Entry 1 becomes a byte-for-byte copy of entry 2: checksums valid, key wrong.
  sh("cp '" + entries[2] + "' '" + entries[1] + "'");
  auto r = probe_bounded({"--package", pkg, "load-all", "cache-wait", "cache-stats"}, env_for(c));
  CHECK_MESSAGE(r.status != -1, "the load hung on the FIFO");
  loads_right(r, m);
  CHECK(field(r.out, "load-all", "cache") <= 1);  // only entry 2 is a hit; 0 and 1 are compiled again
  // Device nodes cannot be made without root (mknod); the FIFO is the non-regular file here.
  MESSAGE("SKIPPED (device node at an entry path): mknod needs root; cache_unit_test covers non-regular files through the seam");
}

TEST_CASE("setuid: no disk cache and no library path from the environment (AT_SECURE)") {
  const char* suid = std::getenv("FATPACK_SEC_SETUID_PROBE");
  if (!suid) {
    MESSAGE("SKIPPED (setuid): FATPACK_SEC_SETUID_PROBE is not set (.ci/run makes a setuid-root copy of the probe)");
    return;
  }
  struct stat st{};
  REQUIRE(::stat(suid, &st) == 0);
  struct statvfs vfs{};
  if (::statvfs(suid, &vfs) == 0 && (vfs.f_flag & ST_NOSUID)) {
    MESSAGE("SKIPPED (setuid): " << suid << " is on a file system mounted nosuid, so AT_SECURE would not be set");
    return;
  }
  if (!(st.st_mode & S_ISUID) || st.st_uid != 0) {
    MESSAGE("SKIPPED (setuid): " << suid << " is not setuid root");
    return;
  }
  const std::string dir = fresh_dir("suid"), c = dir + "/cache";
  auto r = finish(start({suid, "devices", "cache-stats"}, env_for(c)));
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.out.find("FakeCUDA") == std::string::npos);  // FATPACK_LIBCUDA was ignored
  CHECK(r.out.find("cache mode=memory-only") != std::string::npos);
  struct stat cs{};
  CHECK(::stat(c.c_str(), &cs) != 0);  // FATPACK_CACHE_PATH was not created
}
