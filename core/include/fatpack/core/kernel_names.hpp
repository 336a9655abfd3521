// Kernels by C++ name: demangling (bounded) and finding a kernel of an image's kernel list from a
// name a person writes, shared by the CLI (inspect) and the runtime (module::function,
// library::kernel, ...).
//
// Names are compared as `c++filt` prints them (abi::__cxa_demangle), token by token, so that
//  - whitespace does not matter ("mylib::vec<float,4>" is "mylib::vec<float, 4>");
//  - the return type does not matter (template functions demangle with one: "void f<int>(int)");
//  - cv-qualifiers may be written before the type they qualify ("const float*" is c++filt's
//    "float const*"), `restrict` and a parameter's own top-level const are ignored (they are not
//    part of the mangled name), as are parameter names ("const float* in");
//  - builtin types may be spelled the long way ("unsigned long int" is "unsigned long",
//    "long long int" is "long long") and `(void)` is `()`.
// Typedefs are not resolved (`size_t` is not "unsigned long"); names are fully qualified
// ("mylib::affine", "(anonymous namespace)::hidden").
//
// Every name here comes from outside (a query, a package's kernel list): lengths are bounded, a
// query is read without recursion, and __cxa_demangle gets only names whose nesting and demangled
// size are bounded first (a mangled name of a few hundred bytes can otherwise demangle to
// gigabytes: each back-reference may repeat everything before it; demangle.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fatpack::core {

// A query longer than this is refused (errc::invalid_argument in the runtime).
constexpr std::size_t k_max_kernel_query = 64 * 1024;
// Symbols longer than this are not demangled (they are shown and matched as they are).
constexpr std::size_t k_max_demangle_input = 8 * 1024;
// Nor are symbols whose demangled text could be longer than this.
constexpr std::size_t k_max_demangled_size = 1024 * 1024;

// `symbol` as c++filt prints it, or `symbol` itself when it is not a mangled C++ name (extern "C"),
// does not demangle, or is over the bounds above.
std::string demangle_symbol(std::string_view symbol);

// One kernel of a list, in the forms a query is compared with.
struct kernel_name {
  std::string symbol;     // as in the image: mangled for C++, the plain name for extern "C"
  std::string demangled;  // as c++filt prints it (symbol when it does not demangle)
  std::string display;    // demangled without the return type: what messages and `inspect` show
  std::string name;       // canonical qualified name with template arguments: "mylib::affine<float,256>"
  std::string base;       // name without its last template arguments: "mylib::affine"
  std::string params;     // canonical parameter list "(float const*,float*,int)"; empty: none known
};
kernel_name describe_kernel(std::string_view symbol);
std::vector<kernel_name> describe_kernels(const std::vector<std::string>& symbols);

struct kernel_match {
  enum class outcome { found, ambiguous, not_found, bad_query };
  outcome what = outcome::not_found;
  std::vector<std::size_t> matches;  // indices into the list: one when found, every candidate when ambiguous
  std::string problem;               // bad_query: what is wrong with the query
};

// Finds `query` among `kernels`:
//  1. a kernel whose symbol is exactly `query` (a mangled name, an extern "C" name) wins;
//  2. else the query is read as a C++ name: with a parameter list it matches the kernel with that
//     qualified name and those parameters (template arguments may be left out when the parameters
//     tell the instantiations apart); without one it matches every kernel of that qualified name
//     (every overload; every instantiation when it has no template arguments).
// One match: found; several: ambiguous (the candidates in list order); none: not_found.
// An empty query or one over k_max_kernel_query: bad_query.
kernel_match match_kernel(std::string_view query, const std::vector<kernel_name>& kernels);

// "a, b, c" of the kernels' display names, at most `limit` of them, then "and N more"; with
// symbols: "display [symbol]" where the two differ. "no kernels" for an empty list. Each name is shown
// as printable_text (bytes outside printable ASCII as \xNN), at most k_max_listed_name bytes of it.
inline constexpr std::size_t k_max_listed_name = 512;
std::string list_kernels(const std::vector<kernel_name>& kernels, const std::vector<std::size_t>& which,
                         bool with_symbols, std::size_t limit = 32);
std::string list_kernels(const std::vector<kernel_name>& kernels, bool with_symbols, std::size_t limit = 32);

}  // namespace fatpack::core
