#include "process.hpp"

#include "cleanup.hpp"

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

process_result run_process(const std::vector<std::string>& argv, const std::string& tmpdir) {
  process_result r;
  const int out_fd = anonymous_temp_file();  // nameless: nothing to leave behind
  if (out_fd < 0) {
    r.start_error = std::string("cannot create a temporary file in ") + temp_base() + ": " + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<std::string> env;
  if (!tmpdir.empty()) {
    for (char** e = environ; *e; ++e) {
      if (std::strncmp(*e, "TMPDIR=", 7) != 0) env.emplace_back(*e);
    }
    env.push_back("TMPDIR=" + tmpdir);
  }
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = spawn_tracked(&pid, cargv[0], &actions, cargv.data(), tmpdir.empty() ? environ : cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    r.start_error = std::string("cannot run '") + argv[0] + "': " + std::strerror(rc);
    ::close(out_fd);
    return r;
  }
  const int wstatus = wait_tracked(pid);
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
