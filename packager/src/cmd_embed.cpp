// fatpack embed: a source file that links a package into a program (docs/format.md §7).
//
// OUT.cpp: a C++ file with a file-scope asm block (.incbin), so it compiles in projects that enable
// only CXX; OUT.S: the same for the assembler. Both place the package, a registry record and an ELF
// note that leads to the record (core/registry_record.hpp): the runtime finds the note through the
// program headers of every loaded object, so a shared library's packages need no constructor and
// no symbol of the program, and an unloaded library's are noticed. The package's checksum is
// written into the file, so the file changes, and dependent objects rebuild, whenever the package
// changes even though it is only referenced by path.
#include "file_io.hpp"
#include "tool.hpp"

#include "fatpack/core/codec.hpp"
#include "fatpack/core/registry_record.hpp"

#include <climits>
#include <cstdlib>
#include <cstdio>
#include <sstream>

namespace fatpack::tool {
namespace {

// The symbol stem of a package name: letters, digits and '_' kept, any other byte '_'.
// A name that changed on the way gets 8 hex digits of its hash, so that two different names never
// make one stem: "a-b" and "a.b", "ü" and "é" both linked as fatpack_pkg_a_b_record before, and the
// link of a program holding both failed on a duplicate symbol.
std::string sanitize_symbol(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  if (out != s)
    out += "_" + core::hex16(core::xxh3(core::byte_span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size())))
                     .substr(0, 8);
  return out;
}

// A string literal for the GNU assembler (.incbin / .asciz operands). Package names and paths come
// from outside: every byte but printable ASCII is written as an octal escape, and `"` and `\` are
// escaped, so no byte of them can end the string, the line, or the C++ raw string it sits in (a `"`
// never appears unescaped, so `)fatpack_asm"` cannot either). The assembler turns them back into the
// same bytes.
std::string asm_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u > 0x7e) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\%03o", u);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Text from outside (a package name, a path) shown in a comment of the generated file: printable
// ASCII only (anything else as \xNN), and never a sequence that ends a comment ("*/") or continues a
// line comment (a trailing backslash), so nothing of it can become code.
std::string comment_text(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char u = static_cast<unsigned char>(s[i]);
    const bool ends_comment = s[i] == '*' && i + 1 < s.size() && s[i + 1] == '/';
    if (u < 0x20 || u > 0x7e || u == '\\' || ends_comment) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", u);
      out += esc;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string assembly(const std::string& sym, const std::string& name, const std::string& abs_path) {
  const std::string p = "fatpack_pkg_" + sym;
  std::ostringstream a;
  a << "  .pushsection .rodata.fatpack." << sym << ",\"a\",@progbits\n"
    << "  .balign 64\n"
    << p << "_begin:\n"
    << "  .incbin " << asm_string(abs_path) << "\n"
    << p << "_end:\n"
    << p << "_name:\n"
    << "  .asciz " << asm_string(name) << "\n"
    << "  .popsection\n"
    << "  .pushsection fatpack_registry,\"awR\",@progbits\n"
    << "  .balign 8\n"
    << "  .globl " << p << "_record\n"
    << "  .hidden " << p << "_record\n"
    << p << "_record:\n"
    << "  .long 0x" << std::hex << core::registry_record_magic << std::dec << ", " << core::registry_record_version
    << "\n"
    << "  .quad " << p << "_name, " << p << "_begin, " << p << "_end\n"
    << "  .popsection\n"
    // The note that leads the runtime to the record (registry_record.hpp): found through the
    // program headers of whatever object this ends up in, kept by --gc-sections (an SHT_NOTE), and
    // it keeps the record (and so the package) by its relocation.
    << "  .pushsection .note.fatpack,\"a\",@note\n"
    << "  .balign 4\n"
    << "  .long " << sizeof core::note_name << ", 8, " << core::note_type_record << "\n"
    << "  .asciz \"" << core::note_name << "\"\n"
    << "  .balign 4\n"
    << "  .quad " << p << "_record - .\n"
    << "  .popsection\n";
  return a.str();
}

}  // namespace

command_runner add_embed_command(CLI::App& app) {
  struct options {
    std::string output, symbol, file;
  };
  auto o = std::make_shared<options>();
  CLI::App* cmd = app.add_subcommand(
      "embed", "Write a C++ (.cpp/.cc/.cxx) or assembler (.S/.s) file that links the package into a program and "
               "registers it with the runtime");
  cmd->add_option("-o,--output", o->output, "Output file; its extension picks C++ or assembler")->required();
  cmd->add_option("--symbol", o->symbol, "Symbol stem, a C identifier (default: made from the package name); must be unique per program")
      ->check(not_empty("give a symbol stem, or leave --symbol out for the package name's"));
  cmd->add_option("file", o->file, "Package file (.fpk)")->required();
  return [o]() {
    const auto dot = o->output.find_last_of('.');
    const std::string ext = dot == std::string::npos ? "" : o->output.substr(dot);
    const bool cpp = ext == ".cpp" || ext == ".cc" || ext == ".cxx";
    const bool as = ext == ".S" || ext == ".s";
    if (!cpp && !as) throw usage_error{"-o " + o->output + ": the extension must be .cpp, .cc, .cxx, .S or .s"};
    require_output_not_input(o->output, {o->file});
    auto pf = load_package_file(o->file);
    if (!pf) {
      print_error(pf.error().message);
      return exit_failure;
    }
    if (pf->embedded) {
      print_error(o->file + ": is a host binary, not a package file");
      return exit_failure;
    }
    // Several concatenated packages embed as one blob; the runtime reads all of them. The record
    // carries the first package's name.
    const std::string name(pf->packages.front().name());
    // A --symbol given is used as it is, so it must be a C identifier (a name people write in
    // -Wl,-u,fatpack_pkg_<symbol>_record); only the package name's default is made one.
    if (!o->symbol.empty() && sanitize_symbol(o->symbol) != o->symbol)
      throw usage_error{"--symbol '" + o->symbol + "' is not a C identifier (letters, digits and _, not starting with a "
                        "digit)"};
    const std::string sym = o->symbol.empty() ? sanitize_symbol(name) : o->symbol;
    char resolved[PATH_MAX];
    if (!::realpath(o->file.c_str(), resolved)) {
      print_error(o->file + ": cannot resolve the path");
      return exit_failure;
    }
    const std::string checksum = core::hex16(core::xxh3(core::byte_span(pf->bytes)));
    const std::string body = assembly(sym, name, resolved);
    std::ostringstream out;
    if (cpp) {
      out << "// Generated by `fatpack embed` from " << comment_text(resolved) << "; do not edit.\n"
          << "// Package '" << comment_text(name) << "', " << pf->bytes.size() << " bytes, xxh3 " << checksum << ".\n"
          << "// Links the package into the program; fatpack::runtime finds it through the note in .note.fatpack.\n"
          << "// Record symbol: fatpack_pkg_" << sym << "_record (from a static library: -Wl,-u,fatpack_pkg_" << sym
          << "_record).\n"
          << "asm(R\"fatpack_asm(\n"
          << body << ")fatpack_asm\");\n";
    } else {
      out << "/* Generated by `fatpack embed` from " << comment_text(resolved) << "; do not edit.\n"
          << "   Package '" << comment_text(name) << "', " << pf->bytes.size() << " bytes, xxh3 " << checksum << ".\n"
          << "   Record symbol: fatpack_pkg_" << sym << "_record (from a static library: -Wl,-u,fatpack_pkg_" << sym
          << "_record). */\n"
          << body << "  .section .note.GNU-stack,\"\",@progbits\n";
    }
    const std::string text = out.str();
    core::status st = write_file_atomic(o->output, core::byte_span(text));
    if (!st) {
      print_error(st.error().message);
      return exit_failure;
    }
    return exit_ok;
  };
}

}  // namespace fatpack::tool
