// The package of the call without CUDA_ARCHITECTURES: prints its targets (sorted) and checks them against
// EXPECT_DEFAULT_TARGETS ("" = the built-in default: it must carry PTX and must not be CMake's own
// automatic CMAKE_CUDA_ARCHITECTURES=75).
#include <fatpack/fatpack.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

int main() {
  fatpack::load_options o;
  o.package = "defaults";  // NAME defaults to the target's name
  auto plan = fatpack::plan_module("vadd", o);
  if (!plan) {
    std::fprintf(stderr, "defaults: %s\n", plan.error().what());
    return 1;
  }
  std::vector<std::string> names;
  for (const auto& c : plan->candidates) names.push_back(c.target);
  std::sort(names.begin(), names.end());
  std::string targets;
  for (const auto& n : names) targets += (targets.empty() ? "" : " ") + n;
  std::printf("defaults: targets: %s\n", targets.c_str());
  const std::string expected = EXPECT_DEFAULT_TARGETS;
  bool ok;
  if (expected.empty())
    ok = targets.find("compute_") != std::string::npos && targets != "sm_75";
  else
    ok = targets == expected;
  std::printf("defaults: %s (expected: %s)\n", ok ? "ok" : "FAILED",
              expected.empty() ? "the built-in default, with PTX" : expected.c_str());
  return ok ? 0 : 1;
}
