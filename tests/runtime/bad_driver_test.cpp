// Bad runtime inputs from the driver (issue 10, "The suite"), each in a fresh probe process with the
// fake driver: out of memory at module load, and the device lost in the middle of a process's loads
// (FAKECUDA_LOAD_ERROR). Each must give an error value, never a crash, that names the package, the
// module, the entry, the device and the driver, and the loads before it must have worked. (No
// driver, too old a driver, no device and a failing JIT with its log are in runtime_process_test.cpp
// and runtime_test.cpp.)
#include "test_support.hpp"

using namespace fatpack_test;

namespace {

child_result probe_with(const std::vector<std::string>& args, std::map<std::string, std::string> env) {
  env["FATPACK_LIBCUDA"] = FAKECUDA_PATH;
  env["FAKECUDA_DEVICES"] = "90";
  env["FATPACK_CACHE_DISABLE"] = "1";
  std::vector<std::string> argv{PROBE_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_child(argv, env);
  INFO("stdout:\n" << r.out << "\nstderr:\n" << r.err);
  return r;
}

// The failing load's line names everything a user needs to report it.
void names_everything(const child_result& r, const std::string& module, const std::string& package, int cuda) {
  const std::string line_start = "load " + module + " error=";
  auto pos = r.out.find(line_start);
  REQUIRE(pos != std::string::npos);
  const std::string line = r.out.substr(pos, r.out.find('\n', pos) - pos);
  INFO(line);
  CHECK(line.find("cuda=" + std::to_string(cuda)) != std::string::npos);
  CHECK(line.find("package '" + package + "'") != std::string::npos);
  CHECK(line.find("module '" + module + "'") != std::string::npos);
  CHECK(line.find("entry ") != std::string::npos);
  CHECK(line.find("sm_90") != std::string::npos);       // the entry that was tried
  CHECK(line.find("device 0") != std::string::npos);    // the device
  CHECK(line.find("13.0") != std::string::npos);        // the driver (CUDA 13.0)
}

}  // namespace

TEST_CASE("driver out of memory at module load: an error value naming package, module, entry, device, driver") {
  const std::string pkg = package_file("oom_pkg", entries_of("oom_mod", {"vadd.sm_90.cubin"}));
  auto r = probe_with({"--package", pkg, "load", "oom_mod"}, {{"FAKECUDA_LOAD_ERROR", "2"}});
  CHECK(r.status == 1);  // an error, not a signal
  names_everything(r, "oom_mod", "oom_pkg", 2);
}

TEST_CASE("device lost in the middle of the loads: the earlier loads worked, the next one is an error value") {
  std::vector<fatpack::core::entry_input> entries = entries_of("lost_a", {"vadd.sm_90.cubin"});
  for (auto& e : entries_of("lost_b", {"vadd.sm_90.cubin"})) entries.push_back(std::move(e));
  const std::string pkg = package_file("lost_pkg", entries);
  auto r = probe_with({"--package", pkg, "load", "lost_a", "load", "lost_b"}, {{"FAKECUDA_LOAD_ERROR", "46:1"}});
  CHECK(r.status == 1);
  CHECK(r.has("load lost_a device=0 ok"));
  names_everything(r, "lost_b", "lost_pkg", 46);
}
