// Make-syntax dependency files: reading the ones nvcc writes (-MD -MF) and writing the one `fatpack
// build --depfile` leaves for the build system (Make, Ninja, CMake's add_custom_command DEPFILE).
//
// Escapes, as GCC writes them and Make and Ninja read them: a space or tab as `\ `, `#` as `\#`, `$`
// as `$$`, backslashes before an escaped space doubled; a backslash at the end of a line continues it.
#pragma once

#include "fatpack/core/error.hpp"

#include <string>
#include <vector>

namespace fatpack::tool {

// The prerequisites of every rule in a Make-syntax dependency file, in order (targets dropped).
std::vector<std::string> parse_make_prerequisites(const std::string& text);

// "TARGET: DEP1 DEP2 ..." with every path escaped (one prerequisite per line). A path that Make
// cannot express (a newline or NUL in it) is an error naming it.
core::result<std::string> make_depfile_text(const std::string& target, const std::vector<std::string>& prerequisites);

// `fatpack build --depfile`: reads nvcc's dependency files (one per job), and writes `depfile` with
// `output` depending on every prerequisite they name, each once, in order (only when its content
// changes). Prints the error and returns the exit status.
int write_build_depfile(const std::string& depfile, const std::string& output,
                        const std::vector<std::string>& nvcc_depfiles);

}  // namespace fatpack::tool
