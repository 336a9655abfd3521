// Recorded ptxas options and what a JIT makes of them (jit_options.hpp).
#include "fatpack/core/jit_options.hpp"

#include "fatpack/core/hex.hpp"

namespace fatpack::core {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    std::size_t j = i;
    while (j < text.size() && !is_space(text[j])) ++j;
    if (j > i) words.push_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

// A word as messages show it (hostile text): printable, at most 64 characters.
std::string printable(std::string_view w) { return printable_text(w, 64); }

// Decimal digits only, in [lo, hi]; anything else (a sign, a suffix, too many digits) is refused.
bool parse_bounded(std::string_view s, int lo, int hi, int& out) {
  if (s.empty() || s.size() > 9) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) return false;
  out = v;
  return true;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "-maxrregcount=32" -> {"-maxrregcount", "32"}; a word without '=' has no inline value.
struct option_word {
  std::string_view name, value;
  bool has_value = false;
};
option_word split_option(std::string_view w) {
  const auto eq = w.find('=');
  if (eq == std::string_view::npos) return {w, {}, false};
  return {w.substr(0, eq), w.substr(eq + 1), true};
}

}  // namespace

std::string jit_options::canonical() const {
  std::string s;
  auto add = [&](const std::string& w) { s += (s.empty() ? "" : " ") + w; };
  if (optimization_level >= 0) add("-O" + std::to_string(optimization_level));
  if (max_registers > 0) add("-maxrregcount=" + std::to_string(max_registers));
  if (line_info) add("--generate-line-info");
  if (debug_info) add("-g");
  return s;
}

jit_options parse_jit_options(std::string_view text) {
  jit_options o;
  if (text.size() > max_options_text) {
    o.invalid.push_back("options text of " + std::to_string(text.size()) + " bytes (more than " +
                        std::to_string(max_options_text) + "): none applied");
    return o;
  }
  const auto words = split_words(text);
  for (std::size_t k = 0; k < words.size(); ++k) {
    const std::string_view w = words[k];
    const option_word ow = split_option(w);
    // The value of an option that takes one: inline (=N) or the next word.
    auto value = [&](std::string_view& v, std::string& shown) -> bool {
      if (ow.has_value) {
        v = ow.value;
        shown = printable(w);
        return true;
      }
      if (k + 1 >= words.size()) {
        o.invalid.push_back(printable(w) + ": no value follows");
        return false;
      }
      v = words[++k];
      shown = printable(w) + " " + printable(v);
      return true;
    };
    std::string_view v;
    std::string shown;
    int n = 0;
    if (w.size() > 2 && starts_with(w, "-O") && w[2] != '=') {  // -O3
      if (parse_bounded(w.substr(2), 0, max_optimization_level, n))
        o.optimization_level = n;
      else
        o.invalid.push_back(printable(w) + ": not an optimization level (0.." + std::to_string(max_optimization_level) + ")");
    } else if (ow.name == "-O" || ow.name == "--opt-level") {
      if (!value(v, shown)) continue;
      if (parse_bounded(v, 0, max_optimization_level, n))
        o.optimization_level = n;
      else
        o.invalid.push_back(shown + ": not an optimization level (0.." + std::to_string(max_optimization_level) + ")");
    } else if (ow.name == "-maxrregcount" || ow.name == "--maxrregcount") {
      if (!value(v, shown)) continue;
      if (v == "archmax" || v == "archmin")
        o.ignored.push_back(shown);  // valid for ptxas; no CU_JIT_MAX_REGISTERS value says it
      else if (parse_bounded(v, 1, max_register_limit, n))
        o.max_registers = n;
      else
        o.invalid.push_back(shown + ": not a register count (1.." + std::to_string(max_register_limit) + ")");
    } else if (w == "-lineinfo" || w == "--generate-line-info") {
      o.line_info = true;
    } else if (w == "-g" || w == "--device-debug") {
      o.debug_info = true;
    } else if (w == "-v" || w == "--verbose" || w == "--dont-merge-basicblocks" || w == "--return-at-end") {
      // Nothing to pass: the JIT log is verbose already; nvcc records the last two with -G (-g).
    } else if (w.size() > 1 && w[0] == '-') {
      o.ignored.push_back(printable(w));
    } else {
      o.invalid.push_back(printable(w) + ": not an option");
    }
  }
  return o;
}

recorded_options ptxas_options_from_nvcc(const std::vector<std::string>& args) {
  recorded_options r;
  std::vector<std::string> words;
  auto add_list = [&](std::string_view list) {  // -Xptxas takes a comma-separated list
    std::string w;
    for (char c : list) {
      if (c == ',' || is_space(c)) {
        if (!w.empty()) words.push_back(std::move(w));
        w.clear();
      } else {
        w += c;
      }
    }
    if (!w.empty()) words.push_back(std::move(w));
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const option_word ow = split_option(a);
    auto next = [&](std::string& out) -> bool {
      if (ow.has_value) {
        out = std::string(ow.value);
        return true;
      }
      if (i + 1 >= args.size()) {
        r.invalid.push_back(printable(a) + ": no value follows");
        return false;
      }
      out = args[++i];
      return true;
    };
    std::string v;
    if (ow.name == "-maxrregcount" || ow.name == "--maxrregcount") {
      if (next(v)) words.push_back("-maxrregcount=" + v);
    } else if (a == "-lineinfo" || a == "--generate-line-info") {
      words.emplace_back("--generate-line-info");
    } else if (a == "-G" || a == "--device-debug") {
      words.emplace_back("-g");
    } else if (ow.name == "-Xptxas" || ow.name == "--ptxas-options") {
      if (next(v)) add_list(v);
    }
  }
  for (const auto& w : words) r.text += (r.text.empty() ? "" : " ") + w;
  const jit_options parsed = parse_jit_options(r.text);
  for (const auto& w : parsed.invalid) r.invalid.push_back(w);
  r.not_mapped = parsed.ignored;
  return r;
}

}  // namespace fatpack::core
