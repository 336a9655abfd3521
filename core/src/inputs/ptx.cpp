// Reading what fatpack needs from PTX text: the ISA (`.version 9.0`), the target (`.target sm_90a`
// -> compute_90a) and the kernels (`.entry NAME`), plus the toolkit from nvcc's header comment.
//
// Policy: a small lexer, not a line matcher, so that comments (`//`, `/* */`), string literals
// (`.file 1 "a//b.cu"`) and layout (a name followed directly by `(`, directives split over lines)
// cannot fool it. Trailing NUL bytes are ignored: fatbins store PTX NUL-terminated and padded to 8
// bytes. fatpack stores PTX without them (docs/format.md); the runtime appends one NUL when it
// hands the text to the driver. A NUL inside the text is an error. Errors name the source and the
// line. A leading UTF-8 byte order mark is skipped here and dropped on import (ptxas refuses it).
#include "fatpack/core/input.hpp"
#include "inputs/inputs_internal.hpp"
#include "inputs/ptx_lexer.hpp"

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

namespace fatpack::core {
namespace {

using detail::lexer;
using detail::token;

bool parse_isa(std::string_view s, ptx_isa* out) {
  const auto dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 >= s.size() || dot > 3 || s.size() - dot - 1 > 3) return false;
  std::uint32_t major = 0, minor = 0;
  for (char c : s.substr(0, dot)) {
    if (c < '0' || c > '9') return false;
    major = major * 10 + std::uint32_t(c - '0');
  }
  for (char c : s.substr(dot + 1)) {
    if (c < '0' || c > '9') return false;
    minor = minor * 10 + std::uint32_t(c - '0');
  }
  if (major == 0) return false;
  out->major = std::uint16_t(major);
  out->minor = std::uint16_t(minor);
  return true;
}

// Bytes of a PTX scalar type: .u8 .b16 .s32 .f64 .b128 .pred -> 1, 2, 4, 8, 16, 1; 0 for other words.
std::uint32_t ptx_type_size(std::string_view w) {
  if (w == ".pred") return 1;
  if (w.size() < 3 || w[0] != '.' || (w[1] != 'u' && w[1] != 's' && w[1] != 'b' && w[1] != 'f')) return 0;
  std::uint32_t bits = 0;
  for (char c : w.substr(2)) {
    if (c < '0' || c > '9' || bits > 1000) return 0;
    bits = bits * 10 + std::uint32_t(c - '0');
  }
  return bits == 8 || bits == 16 || bits == 32 || bits == 64 || bits == 128 ? bits / 8 : 0;
}

// A decimal count (`.align 8`, `[24]`) up to the largest parameter space (32764 bytes); 0 otherwise.
std::uint32_t small_number(std::string_view w) {
  std::uint32_t v = 0;
  if (w.empty() || w.size() > 5) return 0;
  for (char c : w) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + std::uint32_t(c - '0');
  }
  return v <= 32764 ? v : 0;
}

// "sm_90" / "sm_90a" / "sm_100f" -> target{ptx, arch, variant}.
bool parse_sm(std::string_view s, target* out) {
  auto t = target::parse(s);
  if (!t || t->kind != entry_kind::sass) return false;
  *out = *t;
  out->kind = entry_kind::ptx;
  return true;
}

}  // namespace

namespace detail {

// Size of the text without trailing NUL padding.
byte_span ptx_text(byte_span bytes) {
  std::size_t n = bytes.size;
  while (n > 0 && bytes.data[n - 1] == 0) --n;
  const std::size_t bom = n >= 3 && std::memcmp(bytes.data, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
  return byte_span(bytes.data + bom, n - bom);
}

// PTX must begin (after whitespace and comments) with `.version`, and `.target` must follow.
bool is_ptx_text(byte_span bytes) {
  const byte_span t0 = ptx_text(bytes);
  if (t0.size == 0 || std::memchr(t0.data, 0, t0.size) != nullptr) return false;
  lexer lex(std::string_view(reinterpret_cast<const char*>(t0.data), t0.size));
  token t = lex.next();
  if (t.kind != token::word || t.text != ".version") return false;
  for (int budget = 0; budget < 64; ++budget) {  // .target comes right after .version in valid PTX
    t = lex.next();
    if (t.kind == token::end || t.kind == token::bad) return false;
    if (t.kind == token::word && t.text == ".target") return true;
  }
  return false;
}

}  // namespace detail

result<ptx_info> parse_ptx(byte_span bytes, std::string_view source) {
  const std::string src(source);
  auto fail = [&](errc code, const std::string& what) { return make_error(code, src + ": " + what); };
  const byte_span text = detail::ptx_text(bytes);
  const std::size_t n = text.size;
  if (n == 0) return fail(errc::malformed, "empty PTX");
  if (const void* nul = std::memchr(text.data, 0, n))
    return fail(errc::malformed, "NUL byte at offset " +
                                     std::to_string(static_cast<const std::uint8_t*>(nul) - bytes.data) +
                                     " inside the PTX text (not PTX?)");

  ptx_info info;
  bool have_version = false, have_target = false;
  auto on_comment = [&](std::string_view c) {
    if (info.toolkit_version == 0 && c.find("Cuda compilation tools") != std::string_view::npos)
      info.toolkit_version = detail::release_version(c);
  };
  lexer lex(std::string_view(reinterpret_cast<const char*>(text.data), n));
  std::unordered_set<std::string_view> kernel_names;  // views into the text
  token t = lex.next(on_comment);
  while (t.kind != token::end) {
    if (t.kind == token::bad) return fail(errc::malformed, "line " + std::to_string(t.line) + ": " + std::string(t.text));
    if (t.kind != token::word) {
      t = lex.next(on_comment);
      continue;
    }
    if (t.text == ".version") {
      const token v = lex.next(on_comment);
      if (!have_version) {
        if (v.kind != token::word || !parse_isa(v.text, &info.isa))
          return fail(errc::malformed, "line " + std::to_string(t.line) + ": .version '" + std::string(v.text) +
                                           "' is not MAJOR.MINOR");
        have_version = true;
      }
      t = lex.next(on_comment);
    } else if (t.text == ".target") {
      // `.target sm_90a` or a list such as `.target sm_90, texmode_independent`.
      const std::size_t line = t.line;
      bool found = false;
      token v = lex.next(on_comment);
      for (;;) {
        if (v.kind != token::word) break;
        if (!found && v.text.substr(0, 3) == "sm_") {
          if (!parse_sm(v.text, &info.target))
            return fail(errc::malformed, "line " + std::to_string(line) + ": .target '" + std::string(v.text) +
                                             "' is not sm_XY, sm_XYa or sm_XYf");
          found = true;
        }
        v = lex.next(on_comment);
        if (v.kind != token::punct || v.text != ",") break;
        v = lex.next(on_comment);
      }
      if (!have_target) {
        if (!found) return fail(errc::malformed, "line " + std::to_string(line) + ": .target names no sm_XY architecture");
        have_target = true;
      }
      t = v;
    } else if (t.text == ".entry") {
      const token name = lex.next(on_comment);
      if (name.kind != token::word || name.text.empty() || name.text[0] == '.')
        return fail(errc::malformed, "line " + std::to_string(t.line) + ": .entry without a name");
      // A kernel declared before it is defined (or twice) is listed once. A set of the names seen, not a
      // scan of the list: modules with tens of thousands of kernels exist (split_ptx reads them whole).
      const bool seen = !kernel_names.insert(name.text).second;
      t = lex.next(on_comment);
      // The parameter list: `( .param TYPE [.ptr .space .align N] NAME[[N]], ... )`. What this reader
      // does not understand (a type it does not know, a size beyond the parameter space) leaves the
      // kernel's parameters unknown; it is no error of the PTX.
      std::optional<std::vector<ptx_param>> params;
      if (t.kind == token::punct && t.text == "(") {
        params.emplace();
        std::uint32_t end = 0;
        ptx_param p;
        bool in_param = false, after_ptr = false, understood = true;
        auto close_param = [&] {
          if (!in_param) return;
          in_param = false;
          if (p.size == 0 || p.align == 0) {
            understood = false;
            return;
          }
          p.offset = (end + p.align - 1) / p.align * p.align;
          end = p.offset + p.size;
          if (end > 32764) understood = false;
          params->push_back(p);
        };
        for (t = lex.next(on_comment); t.kind != token::end && t.kind != token::bad &&
                                       !(t.kind == token::punct && t.text == ")");
             t = lex.next(on_comment)) {
          if (t.kind == token::word && t.text == ".param") {
            close_param();
            p = ptx_param{};
            p.align = 0;
            in_param = true;
            after_ptr = false;
          } else if (in_param && t.kind == token::word && t.text == ".ptr") {
            after_ptr = true;
          } else if (in_param && t.kind == token::word && t.text == ".align") {
            t = lex.next(on_comment);
            const std::uint32_t a = t.kind == token::word ? small_number(t.text) : 0;
            if (a == 0 || (a & (a - 1)) != 0) understood = false;
            if (!after_ptr) p.align = a;
            if (t.kind != token::word) break;
          } else if (in_param && t.kind == token::word && ptx_type_size(t.text)) {
            p.size = ptx_type_size(t.text);
            if (p.align == 0) p.align = p.size;
          } else if (in_param && t.kind == token::punct && t.text == "[") {
            t = lex.next(on_comment);
            const std::uint32_t count = t.kind == token::word ? small_number(t.text) : 0;
            if (count == 0 || std::uint64_t(p.size) * count > 32764) understood = false;
            p.size *= count;
            if (t.kind != token::word) break;
          }
        }
        close_param();
        if (!understood || t.kind != token::punct || t.text != ")") params.reset();
        if (t.kind == token::punct && t.text == ")") t = lex.next(on_comment);
      }
      if (!seen) {
        info.kernels.emplace_back(std::string(name.text));
        info.params.push_back(std::move(params));
      }
    } else {
      t = lex.next(on_comment);
    }
  }
  if (!have_version) return fail(errc::malformed, "no .version directive (not PTX?)");
  if (!have_target) return fail(errc::malformed, "no .target directive");
  return info;
}

namespace detail {

// "Cuda compilation tools, release 13.0, V13.0.88" -> 13000; 0 if not found.
std::uint32_t release_version(std::string_view s) {
  const auto at = s.find("release ");
  if (at == std::string_view::npos) return 0;
  std::size_t i = at + 8;
  std::uint32_t major = 0, minor = 0;
  std::size_t digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 3) major = major * 10 + std::uint32_t(s[i++] - '0'), ++digits;
  if (digits == 0 || i >= s.size() || s[i] != '.') return 0;
  ++i;
  digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 2) minor = minor * 10 + std::uint32_t(s[i++] - '0'), ++digits;
  if (digits == 0 || minor > 9) return 0;
  return major * 1000 + minor * 10;
}

}  // namespace detail

}  // namespace fatpack::core
