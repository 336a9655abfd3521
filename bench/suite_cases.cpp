// fatpack_suite's cases: what each child runs and against what its ratio is taken. "@" stands for
// the inputs directory (bench/make_suite_inputs.sh). The groups are the report's tables and the
// natural split of a GPU session into calls (bench/run_suite.sh --help).
#include "suite.hpp"

namespace suite {

namespace {

case_def make(std::string id, std::string group, std::string what, weight w, std::vector<std::string> child,
              std::string env, std::string baseline, bool gpu_only = false) {
  case_def c;
  c.id = std::move(id);
  c.group = std::move(group);
  c.what = std::move(what);
  c.w = w;
  c.child = std::move(child);
  c.env = std::move(env);
  c.baseline = std::move(baseline);
  c.gpu_only = gpu_only;
  return c;
}

std::vector<case_def> build() {
  const auto F = weight::fast, J = weight::jit;
  const std::string names = "@/mid.lz4.fpk";
  std::vector<case_def> v;
  // mid: 40 kernels, every kernel looked up.
  v.push_back(make("raw", "mid", "raw sm_90 cubin, `cuModuleLoadData`", F,
                   {"driver", "--image", "@/mid.sm_90.cubin", "--names", names}, "cold", ""));
  v.push_back(make("fatbin", "mid", "nvcc fatbin (SASS per arch + compute_90 PTX)", F,
                   {"driver", "--image", "@/mid.fatbin", "--names", names}, "cold", "raw", true));
  v.push_back(make("fatbin-compressed", "mid", "nvcc fatbin `-Xfatbin -compress-all`", F,
                   {"driver", "--image", "@/mid.compressed.fatbin", "--names", names}, "cold", "raw", true));
  for (const char* codec : {"lz4", "zstd", "none"})
    v.push_back(make(std::string("sass-") + codec, "mid", std::string("fatpack SASS, ") + codec, F,
                     {"fatpack", "--pkg", std::string("@/mid.") + codec + ".fpk"}, "cold", "raw"));
  v.push_back(make("driver-hit", "mid", "driver cache hit (PTX, `CUDA_CACHE_PATH` primed by one process)", F,
                   {"driver", "--ptx-from", "@/mid.ptx.fpk"}, "driver-hit", "raw"));
  v.push_back(make("fatpack-hit", "mid", "fatpack cache hit (PTX package, cache primed by one process)", F,
                   {"fatpack", "--pkg", "@/mid.ptx.fpk"}, "fatpack-hit", "raw"));
  v.push_back(make("driver-jit", "mid", "driver cold JIT, `cuModuleLoadData(PTX)`", J,
                   {"driver", "--ptx-from", "@/mid.ptx.fpk"}, "cold", ""));
  v.push_back(make("driver-jit-split0", "mid", "driver cold JIT, `CU_JIT_SPLIT_COMPILE=0`", J,
                   {"driver", "--ptx-from", "@/mid.ptx.fpk", "--split0"}, "cold", "driver-jit"));
  v.push_back(make("fatpack-jit", "mid", "fatpack cold JIT", J, {"fatpack", "--pkg", "@/mid.ptx.fpk"}, "cold",
                   "driver-jit-split0"));
  // big: one module of 400 kernels (the driver JITs the whole module at load, whatever is used).
  v.push_back(make("big-driver", "big", "driver, all kernels", J, {"driver", "--ptx-from", "@/big.ptx.fpk"}, "cold", ""));
  v.push_back(make("big-driver-split0", "big", "driver `CU_JIT_SPLIT_COMPILE=0`, all kernels", J,
                   {"driver", "--ptx-from", "@/big.ptx.fpk", "--split0"}, "cold", "big-driver"));
  v.push_back(make("big-driver-split0-1", "big", "driver `CU_JIT_SPLIT_COMPILE=0`, 1 kernel", J,
                   {"driver", "--ptx-from", "@/big.ptx.fpk", "--split0", "--kernels", "1"}, "cold", "big-driver"));
  v.push_back(make("big-fatpack-1", "big", "fatpack, 1 kernel", J, {"fatpack", "--pkg", "@/big.ptx.fpk", "--kernels", "1"},
                   "cold", "big-driver-split0-1"));
  v.push_back(make("big-fatpack-5", "big", "fatpack, 5 kernels", J, {"fatpack", "--pkg", "@/big.ptx.fpk", "--kernels", "5"},
                   "cold", "big-driver-split0"));
  v.push_back(make("big-fatpack-all", "big", "fatpack, all kernels", J, {"fatpack", "--pkg", "@/big.ptx.fpk"}, "cold",
                   "big-driver-split0"));
  // many: 16 modules of 50 kernels.
  v.push_back(make("many-driver", "many", "driver, module after module", J,
                   {"driver", "--ptx-from", "@/many.ptx.fpk", "--all-modules"}, "cold", ""));
  v.push_back(make("many-driver-split0", "many", "driver `CU_JIT_SPLIT_COMPILE=0`, module after module", J,
                   {"driver", "--ptx-from", "@/many.ptx.fpk", "--all-modules", "--split0"}, "cold", "many-driver"));
  v.push_back(make("many-fatpack", "many", "fatpack, `warm()` + every module", J,
                   {"fatpack", "--pkg", "@/many.ptx.fpk", "--all-modules"}, "cold", "many-driver-split0"));
  // procs: N processes start together on the mid PTX, sharing one fresh cache per run.
  for (int n : {1, 4, 8, 16}) {
    auto d = make("procs-driver-" + std::to_string(n), "procs", "driver (shared fresh `CUDA_CACHE_PATH`)", J,
                  {"driver", "--ptx-from", "@/mid.ptx.fpk"}, "procs", "");
    d.processes = n;
    v.push_back(d);
    auto f = make("procs-fatpack-" + std::to_string(n), "procs", "fatpack (shared fresh fatpack cache)", J,
                  {"fatpack", "--pkg", "@/mid.ptx.fpk"}, "procs", d.id);
    f.processes = n;
    f.fatpack_side = true;
    v.push_back(f);
  }
  // speed: kernel time per JIT path (one child per path, run once: the launches repeat inside).
  v.push_back(make("speed", "speed", "kernel speed per JIT path (mid, 40 kernels)", J, {}, "cold", "", true));
  return v;
}

}  // namespace

const std::vector<case_def>& cases() {
  static const std::vector<case_def> all = build();
  return all;
}

const case_def* find_case(const std::string& id) {
  for (const auto& c : cases())
    if (c.id == id) return &c;
  return nullptr;
}

}  // namespace suite
