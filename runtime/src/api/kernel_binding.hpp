// A typed kernel's state (fatpack/launch.hpp): the kernel found through module::function or
// library::kernel, the code that holds it, and what the check of its arguments found.
#pragma once

#include "load/loader.hpp"

#include "fatpack/launch.hpp"

#include <memory>
#include <string>

namespace fatpack::detail {

struct kernel_binding {
  std::shared_ptr<module_state> state;  // keeps the module or library loaded
  std::string name;                     // as the caller asked for it
  CUfunction function = nullptr;        // a module's kernel
  CUkernel kernel = nullptr;            // a library's kernel (cuLaunchKernel takes it as a CUfunction)
  bool checked = false;                 // the arguments were compared with the kernel's parameters
  std::string note;                     // "" when the driver gave them; else from where, or why not
};

}  // namespace fatpack::detail
