// Test helper for cuobjdump_test.sh: imports cubins / PTX / fatbins with core::import_input and
// writes them as one fatbin with core::write_fatbin (the same calls `fatpack export-fatbin` makes,
// without going through a package).
//   fatpack_inputs_export OUT.fatbin INPUT...
#include "fatpack/core/input.hpp"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace fatpack::core;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT.fatbin INPUT...\n", argv[0]);
    return 2;
  }
  std::vector<entry_input> entries;
  for (int i = 2; i < argc; ++i) {
    std::ifstream f(argv[i], std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "%s: cannot read\n", argv[i]);
      return 1;
    }
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto imported = import_input(byte_span(bytes), argv[i], "vadd");
    if (!imported) {
      std::fprintf(stderr, "%s\n", imported.error().message.c_str());
      return 1;
    }
    for (auto& e : imported.value()) entries.push_back(std::move(e));
  }
  auto fatbin = write_fatbin(entries);
  if (!fatbin) {
    std::fprintf(stderr, "write_fatbin: %s\n", fatbin.error().message.c_str());
    return 1;
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(fatbin->data()), static_cast<std::streamsize>(fatbin->size()));
  if (!out) {
    std::fprintf(stderr, "%s: cannot write\n", argv[1]);
    return 1;
  }
  return 0;
}
