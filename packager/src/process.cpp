#include "process.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace fatpack::tool {

process_result run_process(const std::vector<std::string>& argv) {
  process_result r;
  char tmpl[] = "/tmp/fatpack-out.XXXXXX";
  const int out_fd = ::mkstemp(tmpl);
  if (out_fd < 0) {
    r.start_error = std::string("cannot create a temporary file: ") + std::strerror(errno);
    return r;
  }
  ::unlink(tmpl);  // the descriptor keeps it alive; nothing is left behind
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    r.start_error = std::string("cannot run '") + argv[0] + "': " + std::strerror(rc);
    ::close(out_fd);
    return r;
  }
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  ::lseek(out_fd, 0, SEEK_SET);
  char buf[8192];
  for (ssize_t n; (n = ::read(out_fd, buf, sizeof buf)) > 0;) r.output.append(buf, std::size_t(n));
  ::close(out_fd);
  return r;
}

std::string join_command(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    if (a.find_first_of(" \t'\"\\$") == std::string::npos && !a.empty()) {
      s += a;
    } else {
      s += '\'';
      for (char c : a) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
      s += '\'';
    }
  }
  return s;
}

}  // namespace fatpack::tool
