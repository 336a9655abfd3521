// How `fatpack build` reports nvcc failures: a source that fails for every architecture usually fails
// with the same message each time (a syntax error); it is printed once, naming every architecture.
// Different messages (a ptxas limit of one architecture) are printed each once.
#pragma once

#include <string>
#include <vector>

namespace fatpack::tool {

struct nvcc_failure {
  std::string source;
  std::string target;   // "sm_90", "compute_90"
  std::string status;   // "exit 2", or why nvcc could not start
  std::string command;  // the nvcc command, shell-quoted
  std::string output;   // what nvcc printed
};

// One `fatpack: error:` line per distinct (source, status, output), followed by that output.
void print_nvcc_failures(const std::vector<nvcc_failure>& failures);

}  // namespace fatpack::tool
