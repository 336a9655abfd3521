// fatpack_suite's parts (bench/fatpack_suite.cpp is the overview): the case table, the child side
// (what one fresh process times) and the report (markdown from the raw samples).
#pragma once

#include <string>
#include <vector>

namespace suite {

// How many runs a case gets by default: fast cases (well under a second) 15, JITs (seconds) 3.
enum class weight { fast, jit };

// What one case runs. A child is this program with `--child ARGS...` (inputs relative to --inputs);
// `env` is added to the child's environment; a fresh FATPACK_CACHE_PATH is always given.
struct case_def {
  std::string id;          // the --cases name and the row key in the report
  std::string group;       // mid, big, many, procs, speed: the tables of the report
  std::string what;        // the row's label
  weight w = weight::fast;
  std::vector<std::string> child;  // child arguments
  std::string env;         // "cold": CUDA_CACHE_DISABLE=1; "driver-hit"/"fatpack-hit": primed cache; "procs"
  std::string baseline;    // id of the case the ratio is taken against ("" none)
  bool gpu_only = false;   // cannot run on the fake driver (fatbins, device memory, events)
  int processes = 1;       // procs cases: how many start together
  bool fatpack_side = false;  // procs cases: fatpack (else the driver)
};

const std::vector<case_def>& cases();
const case_def* find_case(const std::string& id);

// The child: runs one timed case and prints "RESULT <ms> <jits>" (jits -1 where not observable).
int child_main(const std::vector<std::string>& args);

// Markdown of the suite section from raw sample files (the TSV fatpack_suite writes).
std::string render(const std::vector<std::string>& tsv_files, std::string& error);

}  // namespace suite
