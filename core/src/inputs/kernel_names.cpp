// Kernels by C++ name (kernel_names.hpp): a name (c++filt's output, or what a person wrote) is cut
// into tokens, put in one canonical spelling, and split into qualified name and parameter list.
// Every step is one pass over the tokens (bracket pairs are found once, with a stack), so a hostile
// query of k_max_kernel_query bytes costs linear time and no recursion.
#include "fatpack/core/kernel_names.hpp"

#include "fatpack/core/hex.hpp"

#include <algorithm>
#include <cstring>

namespace fatpack::core {
namespace {

enum class tk { word, number, punct };
struct token {
  tk kind;
  std::string text;
  std::size_t offset;  // where it starts in the text it came from
};
using tokens = std::vector<token>;

bool word_char(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
         c >= 0x80;
}
bool digit(char c) { return c >= '0' && c <= '9'; }
bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

constexpr std::string_view k_anonymous = "(anonymous namespace)";
constexpr std::string_view k_operator_chars = "+-*/%^&|~!=<>,";
constexpr std::string_view k_operators[] = {"+=", "-=", "*=", "/=", "%=", "^=", "&=", "|=", "<<", ">>", "<<=", ">>=",
                                            "==", "!=", "<=", ">=", "<=>", "&&", "||", "++", "--", "->*", "->"};

tokens tokenize(std::string_view s) {
  tokens out;
  std::size_t i = 0;
  auto skip_space = [&](std::size_t j) {
    while (j < s.size() && space(s[j])) ++j;
    return j;
  };
  while (i < s.size()) {
    const char c = s[i];
    if (space(c)) {
      ++i;
      continue;
    }
    const std::size_t start = i;
    if (s.compare(i, k_anonymous.size(), k_anonymous) == 0) {
      out.push_back({tk::word, std::string(k_anonymous), start});
      i += k_anonymous.size();
    } else if (digit(c)) {  // 256, 256u, 4ul: suffixes in one case
      while (i < s.size() && word_char(s[i])) ++i;
      std::string t(s.substr(start, i - start));
      for (auto& ch : t)
        if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
      out.push_back({tk::number, std::move(t), start});
    } else if (word_char(c)) {
      while (i < s.size() && word_char(s[i])) ++i;
      std::string t(s.substr(start, i - start));
      if (t == "operator") {  // operator(), operator<<, operator new[]: one token
        std::size_t j = skip_space(i);
        if (j < s.size() && (s[j] == '(' || s[j] == '[')) {
          const char close = s[j] == '(' ? ')' : ']';
          std::size_t k = skip_space(j + 1);
          if (k < s.size() && s[k] == close) {
            t += s[j];
            t += close;
            i = k + 1;
          }
        } else if (j < s.size() && k_operator_chars.find(s[j]) != std::string_view::npos) {
          // The longest operator spelled there: "operator+<float>" is operator+ with <float>.
          std::size_t best = 1;
          for (std::string_view op : k_operators)
            if (op.size() > best && s.compare(j, op.size(), op) == 0) best = op.size();
          t += std::string(s.substr(j, best));
          i = j + best;
        } else if (s.compare(j, 3, "new") == 0 || s.compare(j, 6, "delete") == 0) {
          const std::size_t n = s[j] == 'n' ? 3 : 6;
          if (j + n >= s.size() || !word_char(s[j + n])) {
            t += " " + std::string(s.substr(j, n));
            i = j + n;
            std::size_t k = skip_space(i);
            if (k + 1 < s.size() && s[k] == '[') {
              std::size_t m = skip_space(k + 1);
              if (m < s.size() && s[m] == ']') {
                t += "[]";
                i = m + 1;
              }
            }
          }
        } else if (s.compare(j, 2, "\"\"") == 0) {
          t += "\"\"";
          i = j + 2;
        }
      }
      out.push_back({tk::word, std::move(t), start});
    } else if (s.compare(i, 2, "::") == 0 || s.compare(i, 2, "&&") == 0) {
      out.push_back({tk::punct, std::string(s.substr(i, 2)), start});
      i += 2;
    } else if (s.compare(i, 3, "...") == 0) {
      out.push_back({tk::punct, "...", start});
      i += 3;
    } else {
      out.push_back({tk::punct, std::string(1, c), start});
      ++i;
    }
  }
  return out;
}

bool is(const token& t, std::string_view text) { return t.text == text; }
bool is_cv(const token& t) { return t.kind == tk::word && (t.text == "const" || t.text == "volatile"); }

constexpr const char* k_builtins[] = {"signed", "unsigned", "short",   "long",     "int",      "char",    "double",
                                      "float",  "bool",     "void",    "wchar_t",  "char8_t",  "char16_t", "char32_t",
                                      "__int128"};
bool is_builtin(const token& t) {
  if (t.kind != tk::word) return false;
  for (const char* b : k_builtins)
    if (t.text == b) return true;
  return false;
}

// A name component: an identifier, not a keyword of a type.
bool is_identifier(const token& t) { return t.kind == tk::word && !is_builtin(t) && !is_cv(t); }

// The partner of every bracket ( ) < > [ ] { }, or npos. A `>` with no `<` open is a plain token
// (an operator in an expression); a closing ( ] } drops the `<` left open inside it.
std::vector<std::size_t> pair_brackets(const tokens& t) {
  constexpr std::size_t none = std::string::npos;
  std::vector<std::size_t> partner(t.size(), none);
  std::vector<std::size_t> open;
  auto opener_of = [](char c) { return c == ')' ? '(' : c == '>' ? '<' : c == ']' ? '[' : '{'; };
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind != tk::punct || t[i].text.size() != 1) continue;
    const char c = t[i].text[0];
    if (c == '(' || c == '<' || c == '[' || c == '{') {
      open.push_back(i);
    } else if (c == ')' || c == '>' || c == ']' || c == '}') {
      const char want = opener_of(c);
      if (c == '>') {
        if (!open.empty() && t[open.back()].text[0] == '<') {
          partner[i] = open.back();
          partner[open.back()] = i;
          open.pop_back();
        }
        continue;
      }
      while (!open.empty() && t[open.back()].text[0] == '<') open.pop_back();
      if (!open.empty() && t[open.back()].text[0] == want) {
        partner[i] = open.back();
        partner[open.back()] = i;
        open.pop_back();
      }
    }
  }
  return partner;
}

// `restrict` and elaborated-type keywords go (not part of a mangled name); builtin types get
// c++filt's spelling; `(void)` becomes `()`.
tokens normalise_words(const tokens& in) {
  tokens t;
  t.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const token& x = in[i];
    if (x.kind == tk::word && (x.text == "restrict" || x.text == "__restrict" || x.text == "__restrict__")) continue;
    if (x.kind == tk::word &&
        (x.text == "struct" || x.text == "class" || x.text == "union" || x.text == "enum" || x.text == "typename") &&
        i + 1 < in.size() && (is_identifier(in[i + 1]) || is(in[i + 1], "::")))
      continue;
    if (is(x, "void") && !t.empty() && is(t.back(), "(") && i + 1 < in.size() && is(in[i + 1], ")")) continue;
    if (!is_builtin(x)) {
      t.push_back(x);
      continue;
    }
    std::size_t j = i;
    while (j < in.size() && is_builtin(in[j])) ++j;
    int sign = 0, unsign = 0, shrt = 0, lng = 0, other = 0;
    std::string base;
    for (std::size_t k = i; k < j; ++k) {
      const std::string& w = in[k].text;
      if (w == "signed") ++sign;
      else if (w == "unsigned") ++unsign;
      else if (w == "short") ++shrt;
      else if (w == "long") ++lng;
      else if (w == "int") continue;
      else if (base.empty()) base = w;
      else ++other;
    }
    std::vector<std::string> spelled;
    const bool plain = other == 0 && sign + unsign <= 1 && lng <= 2 && shrt <= 1 && !(shrt && lng);
    if (!plain || (j - i == 1 && !sign && !unsign)) {
      for (std::size_t k = i; k < j; ++k) t.push_back(in[k]);  // as written (one word, or not a type c++ knows)
      i = j - 1;
      continue;
    }
    if (base == "char") {
      spelled = sign ? std::vector<std::string>{"signed", "char"}
                     : unsign ? std::vector<std::string>{"unsigned", "char"} : std::vector<std::string>{"char"};
    } else if (base == "double") {
      spelled = lng == 1 ? std::vector<std::string>{"long", "double"} : std::vector<std::string>{"double"};
    } else if (base == "__int128") {
      spelled = unsign ? std::vector<std::string>{"unsigned", "__int128"} : std::vector<std::string>{"__int128"};
    } else if (!base.empty()) {
      for (std::size_t k = i; k < j; ++k) t.push_back(in[k]);
      i = j - 1;
      continue;
    } else {
      if (unsign) spelled.push_back("unsigned");
      if (shrt) spelled.push_back("short");
      for (int k = 0; k < lng; ++k) spelled.push_back("long");
      if (!shrt && !lng) spelled.push_back("int");
    }
    for (auto& w : spelled) t.push_back({tk::word, w, in[i].offset});
    i = j - 1;
  }
  return t;
}

// Where the type starting at `j` ends: a run of builtin words, or a qualified name with template
// arguments. j when there is none.
std::size_t type_end(const tokens& t, const std::vector<std::size_t>& partner, std::size_t j) {
  std::size_t p = j;
  if (p < t.size() && is_builtin(t[p])) {
    while (p < t.size() && is_builtin(t[p])) ++p;
    return p;
  }
  if (p < t.size() && is(t[p], "::")) ++p;
  while (p < t.size()) {
    if (is_identifier(t[p])) {
      ++p;
    } else if (is(t[p], "{") && partner[p] != std::string::npos) {
      p = partner[p] + 1;
    } else {
      return j;
    }
    if (p < t.size() && is(t[p], "<") && partner[p] != std::string::npos) p = partner[p] + 1;
    if (p + 1 < t.size() && is(t[p], "::")) {
      ++p;
      continue;
    }
    return p;
  }
  return j;
}

// cv-qualifiers after what they qualify ("const float*" -> "float const*"), const before volatile.
tokens east_cv(const tokens& in) {
  const auto partner = pair_brackets(in);
  tokens t;
  t.reserve(in.size());
  std::size_t i = 0;
  while (i < in.size()) {
    const bool at_start = i == 0 || is(in[i - 1], "(") || is(in[i - 1], ",") || is(in[i - 1], "<");
    if (is_cv(in[i]) && at_start) {
      std::size_t j = i;
      while (j < in.size() && is_cv(in[j])) ++j;
      const std::size_t e = type_end(in, partner, j);
      if (e > j) {
        for (std::size_t k = j; k < e; ++k) t.push_back(in[k]);
        for (std::size_t k = i; k < j; ++k) t.push_back(in[k]);
        i = e;
        continue;
      }
    }
    t.push_back(in[i++]);
  }
  // Runs of cv-qualifiers in one order, once each.
  tokens out;
  out.reserve(t.size());
  for (std::size_t k = 0; k < t.size();) {
    if (!is_cv(t[k])) {
      out.push_back(t[k++]);
      continue;
    }
    bool c = false, v = false;
    const std::size_t offset = t[k].offset;
    while (k < t.size() && is_cv(t[k])) {
      (t[k].text == "const" ? c : v) = true;
      ++k;
    }
    if (c) out.push_back({tk::word, "const", offset});
    if (v) out.push_back({tk::word, "volatile", offset});
  }
  return out;
}

std::string join(const tokens& t, std::size_t from, std::size_t to) {
  std::string s;
  for (std::size_t i = from; i < to; ++i) {
    if (!s.empty() && word_char(s.back()) && word_char(t[i].text.front())) s += ' ';
    s += t[i].text;
  }
  return s;
}

struct parsed {
  std::string name, base, params;
  bool has_params = false;
  std::size_t name_offset = 0;  // where the qualified name starts in the text (after a return type)
};

// Start of the name component that ends at `end` (template arguments included), or npos.
std::size_t component_start(const tokens& t, const std::vector<std::size_t>& partner, std::size_t end) {
  constexpr std::size_t none = std::string::npos;
  std::size_t p = end;
  if (p > 0 && is(t[p - 1], ">")) {
    if (partner[p - 1] == none) return none;
    p = partner[p - 1];
  }
  if (p == 0) return none;
  if (is_identifier(t[p - 1])) return p - 1;
  if (is(t[p - 1], "}") && partner[p - 1] != none) return partner[p - 1];
  return none;
}

parsed parse_name(std::string_view text) {
  const tokens t = east_cv(normalise_words(tokenize(text)));
  const auto partner = pair_brackets(t);
  constexpr std::size_t none = std::string::npos;
  parsed out;
  std::size_t end = t.size();
  std::size_t params_open = none;
  if (!t.empty() && is(t.back(), ")") && partner.back() != none && partner.back() > 0) {
    params_open = partner.back();
    end = params_open;
  }
  // The qualified name: components joined by ::, walking back from the parameter list; what is
  // left in front of it is a return type.
  std::size_t start = end;
  while (true) {
    const std::size_t c = component_start(t, partner, start);
    if (c == none) break;
    start = c;
    if (start >= 1 && is(t[start - 1], "::")) {
      --start;
      if (start == 0) break;
      continue;
    }
    break;
  }
  if (start == end) start = 0;  // no name found: the whole text is the name
  if (start < end && is(t[start], "::")) ++start;
  out.name = join(t, start, end);
  out.name_offset = start < t.size() ? t[start].offset : text.size();
  std::size_t base_end = end;
  if (end > start && is(t[end - 1], ">") && partner[end - 1] != none && partner[end - 1] > start) base_end = partner[end - 1];
  out.base = join(t, start, base_end);
  if (params_open == none) return out;
  out.has_params = true;
  // Each parameter: without a parameter name and without its own top-level cv-qualifiers.
  out.params = "(";
  std::size_t p = params_open + 1;
  const std::size_t close = t.size() - 1;
  bool first = true;
  while (p < close) {
    std::size_t q = p;
    while (q < close && !is(t[q], ",")) q = (partner[q] != none && partner[q] > q) ? partner[q] + 1 : q + 1;
    std::size_t e = std::min(q, close);
    if (e - p >= 2 && is_identifier(t[e - 1]) && !is(t[e - 2], "::") && t[e - 1].text.rfind("operator", 0) != 0) --e;
    while (e - p >= 2 && is_cv(t[e - 1])) --e;
    if (!first) out.params += ",";
    out.params += join(t, p, e);
    first = false;
    p = q + 1;
  }
  out.params += ")";
  return out;
}

}  // namespace

kernel_name describe_kernel(std::string_view symbol) {
  kernel_name k;
  k.symbol = std::string(symbol);
  k.demangled = demangle_symbol(symbol);
  if (k.demangled == k.symbol) {  // extern "C", or not demangled: the name as it is
    k.display = k.name = k.base = k.symbol;
    return k;
  }
  parsed p = parse_name(k.demangled);
  k.display = k.demangled.substr(std::min(p.name_offset, k.demangled.size()));
  k.name = std::move(p.name);
  k.base = std::move(p.base);
  if (p.has_params) k.params = std::move(p.params);
  return k;
}

std::vector<kernel_name> describe_kernels(const std::vector<std::string>& symbols) {
  std::vector<kernel_name> out;
  out.reserve(symbols.size());
  for (const auto& s : symbols) out.push_back(describe_kernel(s));
  return out;
}

kernel_match match_kernel(std::string_view query, const std::vector<kernel_name>& kernels) {
  kernel_match m;
  if (query.empty()) {
    m.what = kernel_match::outcome::bad_query;
    m.problem = "empty kernel name";
    return m;
  }
  if (query.size() > k_max_kernel_query) {
    m.what = kernel_match::outcome::bad_query;
    m.problem = "kernel name of " + std::to_string(query.size()) + " bytes (at most " +
                std::to_string(k_max_kernel_query) + ")";
    return m;
  }
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    if (kernels[i].symbol == query) {
      m.what = kernel_match::outcome::found;
      m.matches = {i};
      return m;
    }
  }
  const parsed q = parse_name(query);
  const bool no_template_args = q.name == q.base;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const kernel_name& k = kernels[i];
    const bool name_fits = q.name == k.name || (no_template_args && q.base == k.base);
    if (!name_fits) continue;
    if (q.has_params && (k.params.empty() || q.params != k.params)) continue;
    m.matches.push_back(i);
  }
  m.what = m.matches.empty()       ? kernel_match::outcome::not_found
           : m.matches.size() == 1 ? kernel_match::outcome::found
                                   : kernel_match::outcome::ambiguous;
  return m;
}

std::string list_kernels(const std::vector<kernel_name>& kernels, const std::vector<std::size_t>& which,
                         bool with_symbols, std::size_t limit) {
  if (which.empty()) return "no kernels";
  std::string s;
  std::size_t shown = 0;
  for (std::size_t i : which) {
    if (i >= kernels.size()) continue;
    if (shown == limit) {
      s += ", and " + std::to_string(which.size() - shown) + " more";
      break;
    }
    const kernel_name& k = kernels[i];
    if (shown) s += ", ";
    // Names come from the package (a cubin's symbols may hold any byte but NUL): control bytes are
    // escaped, so that a message cannot carry a line break or a terminal's escape sequence.
    s += printable_text(k.display, k_max_listed_name);
    if (with_symbols && k.display != k.symbol) s += " [" + printable_text(k.symbol, k_max_listed_name) + "]";
    ++shown;
  }
  return s;
}

std::string list_kernels(const std::vector<kernel_name>& kernels, bool with_symbols, std::size_t limit) {
  std::vector<std::size_t> all(kernels.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  return list_kernels(kernels, all, with_symbols, limit);
}

}  // namespace fatpack::core
