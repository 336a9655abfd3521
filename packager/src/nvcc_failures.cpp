#include "nvcc_failures.hpp"

#include "tool.hpp"

#include <iostream>

namespace fatpack::tool {

void print_nvcc_failures(const std::vector<nvcc_failure>& failures) {
  std::vector<std::vector<const nvcc_failure*>> groups;  // in order of first appearance
  for (const auto& f : failures) {
    bool placed = false;
    for (auto& g : groups) {
      const nvcc_failure& first = *g.front();
      if (first.source == f.source && first.status == f.status && first.output == f.output) {
        g.push_back(&f);
        placed = true;
        break;
      }
    }
    if (!placed) groups.push_back({&f});
  }
  for (const auto& g : groups) {
    const nvcc_failure& first = *g.front();
    std::string targets;
    for (std::size_t i = 0; i < g.size(); ++i)
      targets += (i == 0 ? "" : i + 1 == g.size() ? " and " : ", ") + g[i]->target;
    const std::string same = g.size() > 1 ? ", the same output for each; the first command" : "";
    print_error(first.source + ": nvcc failed for " + targets + " (" + first.status + same + "): " + first.command);
    if (!first.output.empty()) std::cerr << first.output << (first.output.back() == '\n' ? "" : "\n");
  }
}

}  // namespace fatpack::tool
