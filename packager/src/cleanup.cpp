// Signal cleanup and temporary directories (cleanup.hpp).
//
// Why a dedicated sigwait thread and no signal handler: stopping the children, waiting for them and
// removing directory trees takes locks, allocates and calls readdir, none of which is
// async-signal-safe. So the signals are blocked in every thread (blocked in main() before any thread
// starts; threads inherit the mask) and one thread takes them with sigwait(), where it is ordinary
// code: it may lock the registry below, wait on a condition variable and remove files. A self-pipe
// would need the same thread, plus a handler; sigwait needs neither.
//
// The registry (children, temporary files and directories) is guarded by one mutex. Whatever is
// created for the cleanup is created and registered under that mutex, and the signal thread sets
// `stopping` under it, so nothing can be started or created after the cleanup has looked: a thread
// that would start a child or create a file once `stopping` is set, and a thread whose child was
// stopped, parks until the process dies (so no thread prints errors about children it did not know
// were stopped, or writes output from a half-removed directory).
#include "cleanup.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <pthread.h>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace fatpack::tool {
namespace {

struct registry {
  std::mutex m;
  std::condition_variable child_reaped;
  bool installed = false;
  bool stopping = false;  // a signal is being handled: start nothing, create nothing
  sigset_t start_mask;    // the mask fatpack started with: children get it back
  std::set<pid_t> children;
  std::vector<std::string> files, dirs;
};

registry& reg() {
  static auto* r = new registry();  // leaked: the signal thread may use it during static destruction
  return *r;
}

[[noreturn]] void park() {
  for (;;) ::pause();  // every signal that could end the wait is blocked: the signal thread ends the process
}

// The registry's lock, for a thread about to start a child or create a file: when a signal is being
// handled the thread parks instead (what it would make could escape the cleanup, and whatever it
// would report next, the failure of a job that was stopped say, is not worth saying).
std::unique_lock<std::mutex> lock_or_park(registry& r) {
  std::unique_lock<std::mutex> lock(r.m);
  if (r.stopping) {
    lock.unlock();
    park();
  }
  return lock;
}

void erase_one(std::vector<std::string>& v, const std::string& s) {
  auto it = std::find(v.begin(), v.end(), s);
  if (it != v.end()) v.erase(it);
}

// Deeper than any tree fatpack makes; a deeper stale tree (planted) is left, not recursed into.
constexpr int max_depth = 32;

bool remove_tree_at(int parent, const char* name, dev_t dev, int depth);

// Removes what the open directory `fd` holds; never follows a symbolic link, never leaves the file
// system `dev`.
bool remove_contents(int fd, dev_t dev, int depth) {
  if (depth > max_depth) return false;
  const int dir_fd = ::dup(fd);
  if (dir_fd < 0) return false;
  DIR* d = ::fdopendir(dir_fd);
  if (!d) {
    ::close(dir_fd);
    return false;
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  ::closedir(d);
  bool ok = true;
  for (const auto& n : names) ok = remove_tree_at(fd, n.c_str(), dev, depth + 1) && ok;
  return ok;
}

// Removes `name` in the directory `parent`: a directory with all it holds, anything else (a symbolic
// link included: the link, not what it names) with unlinkat.
bool remove_tree_at(int parent, const char* name, dev_t dev, int depth) {
  const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) return ::unlinkat(parent, name, 0) == 0 || errno == ENOENT;
    return errno == ENOENT;
  }
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && st.st_dev == dev && remove_contents(fd, dev, depth);
  ::close(fd);
  if (ok) ok = ::unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
  return ok;
}

bool remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  return remove_tree_at(AT_FDCWD, path.c_str(), st.st_dev, 0);
}

// PREFIX.<pid>.XXXXXX exactly, as temp_dir makes it: pid in decimal without a leading zero and
// within pid_t, then mkdtemp's six letters or digits.
bool parse_temp_name(const char* name, const char* prefix, pid_t* pid) {
  const std::size_t n = std::strlen(prefix);
  if (std::strncmp(name, prefix, n) != 0 || name[n] != '.') return false;
  const char* p = name + n + 1;
  if (*p < '1' || *p > '9') return false;
  long long v = 0;
  for (int digits = 0; *p >= '0' && *p <= '9'; ++p) {
    if (++digits > 10) return false;
    v = v * 10 + (*p - '0');
  }
  if (v > INT_MAX || *p++ != '.') return false;
  for (int i = 0; i < 6; ++i) {
    const char c = p[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  if (p[6] != '\0') return false;
  *pid = pid_t(v);
  return true;
}

void handle_signals(sigset_t set) {
  int sig = 0;
  while (::sigwait(&set, &sig) != 0) {
  }
  registry& r = reg();
  std::unique_lock<std::mutex> lock(r.m);
  r.stopping = true;
  // Each child leads its own process group: this reaches what it started (cicc, ptxas) too. SIGCONT
  // for a stopped one, which would otherwise never see the SIGTERM.
  for (pid_t p : r.children) {
    ::kill(-p, SIGTERM);
    ::kill(-p, SIGCONT);
  }
  auto all_gone = [&] { return r.children.empty(); };
  if (!r.child_reaped.wait_for(lock, std::chrono::seconds(10), all_gone)) {
    for (pid_t p : r.children) ::kill(-p, SIGKILL);
    r.child_reaped.wait_for(lock, std::chrono::seconds(5), all_gone);
  }
  for (const auto& f : r.files) ::unlink(f.c_str());
  for (const auto& d : r.dirs) remove_tree(d);
  // Die of the same signal: default disposition, unblocked in this thread, raised at this thread.
  ::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);
}

}  // namespace

void install_signal_cleanup() {
  registry& r = reg();
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGHUP, SIGINT, SIGTERM, SIGPIPE}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // nohup: stays ignored
    sigaddset(&set, sig);
  }
  ::pthread_sigmask(SIG_BLOCK, &set, &r.start_mask);
  {
    std::lock_guard<std::mutex> lock(r.m);
    r.installed = true;
  }
  if (!sigisemptyset(&set)) std::thread(handle_signals, set).detach();
}

void finish_signal_cleanup() { lock_or_park(reg()); }

int spawn_tracked(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions, char* const argv[],
                  char* const envp[]) {
  registry& r = reg();
  const auto lock = lock_or_park(r);
  posix_spawnattr_t attr;
  if (const int rc = ::posix_spawnattr_init(&attr); rc != 0) return rc;
  short flags = POSIX_SPAWN_SETPGROUP;
  ::posix_spawnattr_setpgroup(&attr, 0);
  if (r.installed) {
    flags |= POSIX_SPAWN_SETSIGMASK;
    ::posix_spawnattr_setsigmask(&attr, &r.start_mask);
  }
  ::posix_spawnattr_setflags(&attr, flags);
  const int rc = ::posix_spawnp(pid, file, actions, &attr, argv, envp);
  ::posix_spawnattr_destroy(&attr);
  if (rc == 0) r.children.insert(*pid);
  return rc;
}

int wait_tracked(pid_t pid) {
  // Wait without reaping, so that the pid (and its process group id) stays this child's while it is
  // registered: the signal thread never signals a reused pid.
  siginfo_t info{};
  while (::waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  registry& r = reg();
  std::unique_lock<std::mutex> lock(r.m);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.children.erase(pid);
  r.child_reaped.notify_all();
  if (r.stopping) {
    lock.unlock();
    park();
  }
  return status;
}

std::string temp_base() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

int anonymous_temp_file() {
  const std::string base = temp_base();
  registry& r = reg();
  const auto lock = lock_or_park(r);
  int fd = ::open(base.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);  // never has a name
  if (fd >= 0) return fd;
  std::string t = base + "/fatpack-out.XXXXXX";  // a file system without O_TMPFILE
  fd = ::mkostemp(t.data(), O_CLOEXEC);
  if (fd >= 0) ::unlink(t.c_str());  // under the lock: the signal cleanup never sees it named
  return fd;
}

int make_temp_file(char* tmpl) {
  registry& r = reg();
  const auto lock = lock_or_park(r);
  const int fd = ::mkostemp(tmpl, O_CLOEXEC);
  if (fd >= 0) r.files.emplace_back(tmpl);
  return fd;
}

void forget_temp_file(const std::string& path) {
  registry& r = reg();
  std::lock_guard<std::mutex> lock(r.m);
  erase_one(r.files, path);
}

temp_dir::temp_dir(const char* prefix) {
  const std::string base = temp_base();
  remove_stale_temp_dirs(base, prefix);
  std::string t = base + "/" + prefix + "." + std::to_string(::getpid()) + ".XXXXXX";
  registry& r = reg();
  const auto lock = lock_or_park(r);
  if (!::mkdtemp(t.data())) {
    error_ = "cannot create a temporary directory in " + base + ": " + std::strerror(errno);
    return;
  }
  path_ = t;
  r.dirs.push_back(path_);
  // Held while this process lives: a sweep that cannot tell this pid is alive (another pid
  // namespace sharing the directory) finds the directory locked and leaves it.
  lock_fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (lock_fd_ >= 0) ::flock(lock_fd_, LOCK_EX | LOCK_NB);
}

temp_dir::~temp_dir() {
  if (path_.empty()) return;
  remove_tree(path_);
  {
    registry& r = reg();
    std::lock_guard<std::mutex> lock(r.m);
    erase_one(r.dirs, path_);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

int remove_stale_temp_dirs(const std::string& base, const char* prefix) {
  const int base_fd = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (base_fd < 0) return 0;
  std::vector<std::pair<std::string, pid_t>> candidates;
  if (const int list_fd = ::dup(base_fd); list_fd >= 0) {
    if (DIR* d = ::fdopendir(list_fd)) {
      while (const dirent* e = ::readdir(d)) {
        pid_t pid = 0;
        if (parse_temp_name(e->d_name, prefix, &pid)) candidates.emplace_back(e->d_name, pid);
      }
      ::closedir(d);
    } else {
      ::close(list_fd);
    }
  }
  int removed = 0;
  const pid_t self = ::getpid();
  const uid_t me = ::geteuid();
  for (const auto& [name, pid] : candidates) {
    if (pid == self) continue;
    struct stat st {};
    // Only a real directory (not a link to one) of this user.
    if (::fstatat(base_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != me)
      continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (EPERM: alive, someone else's)
    const int fd = ::openat(base_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat now {};
    const bool same = ::fstat(fd, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino && now.st_uid == me;
    if (same && ::flock(fd, LOCK_EX | LOCK_NB) == 0 && remove_contents(fd, st.st_dev, 0) &&
        ::unlinkat(base_fd, name.c_str(), AT_REMOVEDIR) == 0)
      ++removed;
    ::close(fd);
  }
  ::close(base_fd);
  return removed;
}

}  // namespace fatpack::tool
