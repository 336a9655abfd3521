// Bounded demangling (kernel_names.hpp): abi::__cxa_demangle, given only names whose demangled size
// is known to be bounded.
//
// Why a bound first: an Itanium name refers back to earlier parts of itself ("S0_": the second
// substitution candidate, "T_": the first template argument), and a part may itself hold such
// references, so the printed text can double with every few bytes of input: a 300-byte name of the
// form A<S_,S_>, A<S0_,S0_>, ... prints 14 GB, and __cxa_demangle takes minutes and all the memory
// doing it (it has no limit of its own).
//
// The bound: a small parser of the grammar walks the name once, without printing, keeping for each
// substitution candidate an upper bound of its printed size, in the order the ABI numbers them
// (prefixes of nested names, template names before their arguments, every non-builtin type), so a
// reference costs what it refers to. A template-parameter reference costs the largest template
// argument seen so far. Every construct is charged at least as much as c++filt prints for it. A
// name the parser does not model (expressions, decltype, special names) gets a cruder bound: each
// back-reference may double everything before it; only names of at most k_max_crude_input bytes get
// it. The parser's recursion is bounded by k_max_depth; a deeper name is not demangled.
#include "fatpack/core/kernel_names.hpp"

#include <cxxabi.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

namespace fatpack::core {
namespace {

using u64 = std::uint64_t;
constexpr u64 k_saturated = u64(1) << 60;
constexpr int k_max_depth = 256;
// A name the parser cannot follow is demangled only when short: its depth is then bounded by its
// length (__cxa_demangle recurses once per level).
constexpr std::size_t k_max_crude_input = 256;

u64 add(u64 a, u64 b) { return a >= k_saturated || b >= k_saturated || a + b >= k_saturated ? k_saturated : a + b; }

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }

class size_bound {
 public:
  explicit size_bound(std::string_view s) : s_(s) {}

  // The name nests deeper than k_max_depth: not demangled at all (__cxa_demangle recurses as deep).
  bool too_deep() const { return too_deep_; }

  // The bound, or k_saturated when the name is not one the parser models.
  u64 mangled_name() {
    if (s_.substr(0, 2) != "_Z") return k_saturated;
    pos_ = 2;
    u64 c = encoding();
    // A vendor suffix (".clone.1", ".constprop.0") prints as " [clone ...]".
    if (!failed_ && pos_ < s_.size() && s_[pos_] == '.') c = add(c, 16 * (s_.size() - pos_));
    else if (pos_ != s_.size()) failed_ = true;
    return failed_ ? k_saturated : c;
  }

 private:
  std::string_view s_;
  std::size_t pos_ = 0;
  bool failed_ = false;
  bool too_deep_ = false;
  int depth_ = 0;
  std::vector<u64> subs_;  // substitution candidates' printed-size bounds, in ABI order
  u64 max_template_arg_ = 32;
  bool last_was_template_ = false;  // the name just parsed ended in template arguments

  struct nest {
    size_bound& b;
    explicit nest(size_bound& x) : b(x) {
      if (++b.depth_ > k_max_depth) b.failed_ = b.too_deep_ = true;
    }
    ~nest() { --b.depth_; }
  };

  char peek(std::size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  u64 fail() {
    failed_ = true;
    pos_ = s_.size();
    return 0;
  }
  bool expect(char c) {
    if (peek() != c) {
      fail();
      return false;
    }
    ++pos_;
    return true;
  }
  u64 number() {  // [n] digits
    if (peek() == 'n') ++pos_;
    if (!is_digit(peek())) return fail();
    u64 v = 0;
    while (is_digit(peek())) {
      v = v > 1000000 ? v : v * 10 + u64(peek() - '0');
      ++pos_;
    }
    return v;
  }
  void push(u64 c) { subs_.push_back(c); }

  u64 source_name() {
    u64 n = number();
    if (failed_ || n > s_.size() - pos_) return fail();
    pos_ += n;
    return n < 24 ? 24 : n;  // "_GLOBAL__N_..." prints as "(anonymous namespace)"
  }

  u64 encoding() {
    nest g(*this);
    if (failed_) return 0;
    char c = peek();
    if (c == 'T' || (c == 'G' && peek(1) == 'V') || (c == 'G' && peek(1) == 'R')) return fail();  // special names
    u64 cost = name();
    if (failed_) return 0;
    if (pos_ >= s_.size() || peek() == 'E' || peek() == '.') return cost;  // not a function
    if (last_was_template_) cost = add(cost, add(type(), 1));  // the return type
    while (!failed_ && pos_ < s_.size() && peek() != 'E' && peek() != '.') cost = add(cost, add(type(), 2));
    return add(cost, 32);
  }

  u64 name() {
    nest g(*this);
    last_was_template_ = false;
    if (failed_) return 0;
    char c = peek();
    if (c == 'N') return nested_name();
    if (c == 'Z') return local_name();  // last_was_template_: that of its own name
    u64 cost = 0;
    bool candidate = true;
    if (c == 'S' && peek(1) == 't') {
      pos_ += 2;
      cost = add(unqualified_name(), 5);
    } else if (c == 'S') {
      cost = substitution();
      candidate = false;
      if (peek() != 'I') return fail();
    } else {
      cost = unqualified_name();
    }
    bool tmpl = false;
    if (!failed_ && peek() == 'I') {
      if (candidate) push(cost);
      cost = add(cost, template_args());
      tmpl = true;
    }
    last_was_template_ = tmpl;
    return cost;
  }

  u64 nested_name() {
    ++pos_;  // N
    u64 cost = 0;
    while (peek() == 'r' || peek() == 'V' || peek() == 'K') {
      ++pos_;
      cost = add(cost, 10);
    }
    if (peek() == 'R' || peek() == 'O') {
      ++pos_;
      cost = add(cost, 3);
    }
    u64 acc = 0;
    bool have = false, tmpl = false;
    while (!failed_) {
      char c = peek();
      bool was_sub = false;
      if (c == 'E') {
        ++pos_;
        break;
      }
      if (c == 'S' && peek(1) != 't') {
        acc = have ? add(acc, add(substitution(), 2)) : substitution();
        was_sub = true;
      } else if (c == 'S') {  // St inside N: std::
        pos_ += 2;
        acc = add(acc, 5);
        was_sub = true;
      } else if (c == 'I') {
        if (!have) return fail();
        acc = add(acc, template_args());
      } else if (c == 'T') {
        acc = have ? add(acc, add(template_param(), 2)) : template_param();
      } else if (c == 'M') {
        if (!have) return fail();
        ++pos_;
        continue;
      } else if (is_digit(c) || is_lower(c) || c == 'U' || c == 'L') {
        acc = have ? add(acc, add(unqualified_name(), 2)) : unqualified_name();
      } else {
        return fail();
      }
      have = true;
      tmpl = c == 'I';
      if (!was_sub && peek() != 'E') push(acc);
    }
    last_was_template_ = tmpl;
    return add(cost, acc);
  }

  u64 local_name() {
    ++pos_;  // Z
    u64 cost = encoding();
    if (!expect('E')) return 0;
    if (peek() == 's') {
      ++pos_;
      cost = add(cost, 24);
    } else {
      if (peek() == 'd') {
        ++pos_;
        if (peek() != '_') number();
        expect('_');
        cost = add(cost, 24);
      }
      cost = add(cost, add(name(), 2));
    }
    // discriminator: _ <digit> | __ <number> _
    if (peek() == '_' && is_digit(peek(1))) {
      pos_ += 2;
    } else if (peek() == '_' && peek(1) == '_' && is_digit(peek(2))) {
      pos_ += 2;
      number();
      expect('_');
    }
    return cost;
  }

  u64 unqualified_name() {
    nest g(*this);
    if (failed_) return 0;
    char c = peek();
    u64 cost = 0;
    if (is_digit(c)) {
      cost = source_name();
    } else if (c == 'L' && is_digit(peek(1))) {  // internal linkage
      ++pos_;
      cost = source_name();
    } else if (c == 'U' && peek(1) == 't') {  // unnamed type: Ut [n] _
      pos_ += 2;
      if (peek() != '_') number();
      expect('_');
      cost = 32;
      push(cost);
    } else if (c == 'U' && peek(1) == 'l') {  // lambda: Ul <types> E [n] _
      pos_ += 2;
      cost = 32;
      while (!failed_ && peek() != 'E') cost = add(cost, add(type(), 2));
      expect('E');
      if (peek() != '_') number();
      expect('_');
      push(cost);
    } else if (is_lower(c) && is_lower(peek(1))) {  // operator name
      if (c == 'c' && peek(1) == 'v') return fail();  // conversion operator: not a kernel
      const bool literal = c == 'l' && peek(1) == 'i';
      pos_ += 2;
      cost = 24;
      if (literal) cost = add(cost, source_name());
    } else {
      return fail();
    }
    while (!failed_ && peek() == 'B') {  // ABI tags: [abi:...]
      ++pos_;
      cost = add(cost, add(source_name(), 8));
    }
    return cost;
  }

  u64 substitution() {
    ++pos_;  // S
    char c = peek();
    if (is_lower(c)) {  // St Sa Sb Ss Si So Sd
      ++pos_;
      return 96;
    }
    std::size_t index = 0;
    if (c != '_') {
      u64 v = 0;
      while (is_digit(peek()) || is_upper(peek())) {
        char d = peek();
        v = v > 1000000 ? v : v * 36 + u64(is_digit(d) ? d - '0' : d - 'A' + 10);
        ++pos_;
      }
      index = std::size_t(v) + 1;
    }
    if (!expect('_') || index >= subs_.size()) return fail();
    return subs_[index];
  }

  u64 template_param() {
    ++pos_;  // T
    if (peek() != '_') number();
    expect('_');
    return max_template_arg_;
  }

  u64 template_args() {
    nest g(*this);
    ++pos_;  // I
    u64 cost = 4;
    while (!failed_ && peek() != 'E') {
      u64 a = template_arg();
      if (a > max_template_arg_) max_template_arg_ = a;
      cost = add(cost, add(a, 2));
    }
    expect('E');
    return cost;
  }

  u64 template_arg() {
    nest g(*this);
    if (failed_) return 0;
    char c = peek();
    if (c == 'L') {  // literal: L <type> <value> E, or L _Z <encoding> E
      ++pos_;
      u64 cost = 0;
      if (peek() == '_' && peek(1) == 'Z') {
        pos_ += 2;
        cost = encoding();
      } else {
        cost = type();
        std::size_t start = pos_;
        while (pos_ < s_.size() && peek() != 'E') ++pos_;
        cost = add(cost, add(pos_ - start, 8));
      }
      expect('E');
      return cost;
    }
    if (c == 'J') {  // argument pack
      ++pos_;
      u64 cost = 0;
      while (!failed_ && peek() != 'E') cost = add(cost, add(template_arg(), 2));
      expect('E');
      return cost;
    }
    if (c == 'X') return fail();  // expressions: not modelled
    return type();
  }

  u64 type() {
    nest g(*this);
    if (failed_) return 0;
    char c = peek();
    u64 cost = 0;
    switch (c) {
      case 'v': case 'w': case 'b': case 'c': case 'a': case 'h': case 's': case 't': case 'i': case 'j':
      case 'l': case 'm': case 'x': case 'y': case 'n': case 'o': case 'f': case 'd': case 'e': case 'g':
      case 'z':
        ++pos_;
        return 24;
      case 'u':  // vendor extended type
        ++pos_;
        cost = source_name();
        break;
      case 'D': {
        char d = peek(1);
        if (d == 'p') {  // pack expansion
          pos_ += 2;
          cost = add(type(), 4);
        } else if (d == 'v') {  // vector
          pos_ += 2;
          if (peek() != '_') number();
          expect('_');
          cost = add(type(), 24);
        } else if (d == 'F') {  // DF <n> _ / DF <n> b / DF <n> x
          pos_ += 2;
          number();
          if (peek() == '_' || peek() == 'b' || peek() == 'x') ++pos_;
          else return fail();
          return 24;
        } else if (d == 'n' || d == 'a' || d == 'c' || d == 'i' || d == 's' || d == 'u' || d == 'h' || d == 'f' ||
                   d == 'd' || d == 'e') {
          pos_ += 2;
          return 24;
        } else {
          return fail();  // decltype and the rest: not modelled
        }
        break;
      }
      case 'r': case 'V': case 'K': {
        while (peek() == 'r' || peek() == 'V' || peek() == 'K') {
          ++pos_;
          cost = add(cost, 10);
        }
        cost = add(cost, type());
        break;
      }
      case 'P': case 'R': case 'O': case 'C': case 'G':
        ++pos_;
        cost = add(type(), 4);
        break;
      case 'F': {
        ++pos_;
        if (peek() == 'Y') ++pos_;
        cost = add(type(), 16);
        while (!failed_ && peek() != 'E') {
          if ((peek() == 'R' || peek() == 'O') && peek(1) == 'E') {
            ++pos_;
            cost = add(cost, 3);
            continue;
          }
          cost = add(cost, add(type(), 2));
        }
        expect('E');
        break;
      }
      case 'A':
        ++pos_;
        if (is_digit(peek())) number();
        else if (peek() != '_') return fail();  // a dimension expression: not modelled
        expect('_');
        cost = add(type(), 24);
        break;
      case 'M':
        ++pos_;
        cost = add(type(), 8);
        cost = add(cost, type());
        break;
      case 'T':
        cost = template_param();
        if (peek() == 'I') {
          push(cost);
          cost = add(cost, template_args());
        }
        break;
      case 'S':
        if (is_digit(peek(1)) || is_upper(peek(1)) || peek(1) == '_') {
          cost = substitution();
          if (peek() != 'I') return cost;  // a substitution alone is no new candidate
          cost = add(cost, template_args());
        } else if (peek(1) == 't') {
          cost = name();
        } else {
          cost = substitution();  // Sa, Ss, ...: std:: abbreviations
          if (peek() != 'I') return cost;
          cost = add(cost, template_args());
        }
        break;
      case 'N': case 'Z': case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8':
      case '9':
        cost = name();
        break;
      default:
        return fail();
    }
    if (failed_) return 0;
    push(cost);
    return cost;
  }
};

// When the parser cannot follow the name: every back-reference may repeat all that came before.
u64 crude_bound(std::string_view s) {
  u64 bound = add(u64(s.size()) * 48, 64);
  for (std::size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] != 'S' && s[i] != 'T') continue;
    std::size_t j = i + 1;
    while (j < s.size() && (is_digit(s[j]) || is_upper(s[j]))) ++j;
    if (j < s.size() && s[j] == '_') bound = add(bound, bound);
  }
  return bound;
}

}  // namespace

std::string demangle_symbol(std::string_view symbol) {
  if (symbol.size() < 3 || symbol.size() > k_max_demangle_input || symbol.substr(0, 2) != "_Z")
    return std::string(symbol);
  if (symbol.find('\0') != std::string_view::npos) return std::string(symbol);
  size_bound parser(symbol);
  u64 bound = parser.mangled_name();
  if (parser.too_deep()) return std::string(symbol);
  if (bound >= k_saturated) bound = symbol.size() <= k_max_crude_input ? crude_bound(symbol) : k_saturated;
  if (bound > k_max_demangled_size) return std::string(symbol);
  const std::string z(symbol);
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !out) return z;
  return std::string(out.get());
}

}  // namespace fatpack::core
