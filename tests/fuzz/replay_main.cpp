// A main for the fuzz targets built with the normal compiler: feeds every file of the given corpus
// folders (and files) to LLVMFuzzerTestOneInput once, so CTest replays the committed corpora
// (tests/fuzz/corpus/<target>/) in every build, without Clang or libFuzzer. An input that crashes
// fails the test (the process dies); an empty corpus fails too (it would test nothing).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path p(argv[i]);
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "replay: %s: no such file or folder\n", argv[i]);
      return 1;
    }
  }
  std::sort(files.begin(), files.end());  // a fixed order, so a failure names the same input
  std::uint64_t bytes = 0;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<std::uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.eof() && !in.good()) {
      std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
      return 1;
    }
    std::fprintf(stderr, "%s\n", f.c_str());  // the last line printed names a crashing input
    // A copy of exactly `size` bytes, so that ASan catches a read one past the end.
    std::vector<std::uint8_t> exact(data);
    LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
    bytes += data.size();
  }
  std::printf("replayed %zu inputs (%llu bytes)\n", files.size(), static_cast<unsigned long long>(bytes));
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs: an empty corpus tests nothing\n");
    return 1;
  }
  return 0;
}
