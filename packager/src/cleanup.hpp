// Leaving nothing behind, however a command ends (docs/cli.md "Temporary files and signals").
//
// On SIGHUP, SIGINT, SIGTERM or SIGPIPE the CLI stops the tools it runs (nvcc and everything nvcc
// started), waits for them, removes its temporary files and directories, then dies of the same
// signal (exit status 128+N). SIGKILL cannot be caught: temporary directories carry the pid that
// made them (PREFIX.<pid>.XXXXXX), so a later run removes the ones whose process is gone
// (remove_stale_temp_dirs).
#pragma once

#include <spawn.h>
#include <string>
#include <sys/types.h>

namespace fatpack::tool {

// Once, in main(), before any other thread exists: blocks the signals above in this thread (so in
// every thread started later) and starts the thread that handles them. A signal that was ignored
// when fatpack started (nohup, a background job of a non-interactive shell) stays ignored.
void install_signal_cleanup();
// At the end of main(): if a signal is being handled, wait for it to end the process rather than
// exiting while the cleanup runs.
void finish_signal_cleanup();

// While a signal is being handled, the functions below that start or create something never return:
// the calling thread waits for the process to die of that signal.

// posix_spawnp, registered for the signal cleanup: the child gets the signal mask fatpack started
// with and a process group of its own (so that stopping it reaches the tools it starts). Returns
// posix_spawnp's error.
int spawn_tracked(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions, char* const argv[],
                  char* const envp[]);
// Waits for a child of spawn_tracked and returns its waitpid status.
int wait_tracked(pid_t pid);

// The directory temporary files go to: $TMPDIR when set and not empty, else /tmp.
std::string temp_base();
// A descriptor for an anonymous temporary file in temp_base() (created and unlinked as one step for
// the signal cleanup, close-on-exec), or -1 with errno set.
int anonymous_temp_file();
// mkstemp(tmpl) registered for removal on a signal until forget_temp_file(tmpl); returns the
// descriptor (close-on-exec) or -1.
int make_temp_file(char* tmpl);
void forget_temp_file(const std::string& path);

// A private directory temp_base()/PREFIX.<pid>.XXXXXX, removed with everything in it (never
// following a symbolic link) when it goes out of scope or on a signal. Before creating it, stale
// PREFIX.<pid>.XXXXXX directories of this user whose process is gone are removed.
class temp_dir {
 public:
  explicit temp_dir(const char* prefix);
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }  // why !ok()

 private:
  std::string path_, error_;
  int lock_fd_ = -1;  // flock'ed while this process lives (a stale-dir sweep in another pid namespace)
};

// Removes stale PREFIX.<pid>.XXXXXX directories in `base` (see temp_dir). Returns how many.
int remove_stale_temp_dirs(const std::string& base, const char* prefix);

}  // namespace fatpack::tool
