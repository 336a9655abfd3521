// Running external tools (nvcc) without a shell: argv is passed as is, output captured.
#pragma once

#include <string>
#include <vector>

namespace fatpack::tool {

struct process_result {
  int exit_code = -1;      // -1: could not start; 128+N: killed by signal N
  std::string output;      // stdout and stderr, interleaved
  std::string start_error; // why it could not start
};

// tmpdir: when not empty, the child's $TMPDIR (so that what it leaves goes where fatpack removes it).
process_result run_process(const std::vector<std::string>& argv, const std::string& tmpdir = {});
std::string join_command(const std::vector<std::string>& argv);  // for messages, shell-quoted

}  // namespace fatpack::tool
