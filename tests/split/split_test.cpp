// Unit tests of the PTX splitter (core/ptx_split.hpp) on small hand-written PTX: one case for each
// thing docs/splitting.md says is split, kept together, copied or refused, and the limits.
#include "fatpack/core/ptx_split.hpp"

#include <doctest/doctest.h>

#include <string>

namespace {

using fatpack::core::byte_span;
using fatpack::core::ptx_split_options;
using fatpack::core::ptx_split_result;
using fatpack::core::split_ptx;

const std::string header = "//\n// Cuda compilation tools, release 13.0, V13.0.88\n//\n\n.version 9.0\n.target sm_80\n.address_size 64\n\n";

std::string kernel(const std::string& name, const std::string& body) {
  return ".visible .entry " + name + "(\n\t.param .u64 " + name + "_param_0\n)\n{\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n" +
         body + "\tret;\n}\n";
}

ptx_split_result split(const std::string& text, ptx_split_options options = {}) {
  auto r = split_ptx(byte_span(text), "test.ptx", options);
  REQUIRE_MESSAGE(r.has_value(), (r ? std::string() : r.error().message));
  return std::move(r).value();
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }
std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
// The index of the piece holding `kernel`, or the piece count when none does.
std::size_t piece_of(const ptx_split_result& r, const std::string& kernel_name) {
  for (std::size_t i = 0; i < r.pieces.size(); ++i)
    for (const auto& k : r.pieces[i].kernels)
      if (k == kernel_name) return i;
  return r.pieces.size();
}

}  // namespace

TEST_CASE("independent kernels go to separate pieces, each a complete module with the header") {
  const std::string text = header + kernel("k1", "\tmov.u32 %r1, 1;\n") + kernel("k2", "\tmov.u32 %r1, 2;\n");
  auto r = split(text);
  CHECK(r.unsplit_reason.empty());
  REQUIRE(r.pieces.size() == 2);
  CHECK(r.pieces[0].kernels == std::vector<std::string>{"k1"});
  CHECK(r.pieces[1].kernels == std::vector<std::string>{"k2"});
  for (const auto& p : r.pieces) {
    CHECK(p.text.rfind(header.substr(0, header.size() - 1), 0) == 0);  // nvcc's comment and the header
    CHECK(count(p.text, ".entry") == 1);
  }
}

TEST_CASE("a callee goes with every piece that calls it, transitively; unused ones with none") {
  const std::string text = header +
                           ".func leaf()\n{\n\tret;\n}\n"
                           ".func mid()\n{\n\tcall.uni leaf, ();\n\tret;\n}\n"
                           ".func other()\n{\n\tret;\n}\n" +
                           kernel("k1", "\tcall.uni mid, ();\n") + kernel("k2", "\tcall.uni leaf, ();\n") +
                           kernel("k3", "\tcall.uni other, ();\n");
  auto r = split(text);
  REQUIRE(r.pieces.size() == 3);
  CHECK(has(r.pieces[0].text, ".func mid()"));
  CHECK(has(r.pieces[0].text, ".func leaf()"));
  CHECK(has(r.pieces[1].text, ".func leaf()"));
  CHECK_FALSE(has(r.pieces[1].text, ".func mid()"));
  CHECK_FALSE(has(r.pieces[0].text, ".func other()"));
  CHECK(has(r.pieces[2].text, ".func other()"));
  CHECK_FALSE(has(r.pieces[2].text, "leaf"));
}

TEST_CASE("kernels sharing a .global or a .const stay together; a variable used by one kernel goes with it") {
  const std::string text = header +
                           ".global .align 4 .u32 shared_counter;\n"
                           ".const .align 4 .b8 coeffs[64];\n"
                           ".global .align 4 .u32 own_counter;\n" +
                           kernel("a", "\tatom.global.add.u32 %r1, [shared_counter], 1;\n") +
                           kernel("b", "\tld.const.u32 %r1, [coeffs];\n\tatom.global.add.u32 %r2, [shared_counter], 1;\n") +
                           kernel("c", "\tld.const.u32 %r1, [coeffs+4];\n") +
                           kernel("d", "\tatom.global.add.u32 %r1, [own_counter], 1;\n") + kernel("e", "");
  auto r = split(text);
  REQUIRE(r.pieces.size() == 3);
  CHECK(r.pieces[0].kernels == std::vector<std::string>{"a", "b", "c"});
  CHECK(r.pieces[1].kernels == std::vector<std::string>{"d"});
  CHECK(count(r.pieces[0].text, "shared_counter;") == 1);
  CHECK(has(r.pieces[1].text, "own_counter;"));
  CHECK_FALSE(has(r.pieces[0].text, "own_counter"));
  CHECK_FALSE(has(r.pieces[2].text, ".global"));
}

TEST_CASE("one declaration of several variables is one unit: its users stay together") {
  const std::string text = header + ".global .align 4 .u32 x, y;\n" + kernel("a", "\tst.global.u32 [x], 1;\n") +
                           kernel("b", "\tst.global.u32 [y], 1;\n");
  auto r = split(text);
  CHECK(r.pieces.size() == 1);
  CHECK(r.unsplit_reason.empty());  // split as asked; the sharing made it one piece
}

TEST_CASE("a variable whose initializer names another joins their users; attributes do not hide a name") {
  const std::string text = header +
                           ".global .align 4 .u32 x;\n"
                           ".global .align 8 .u64 p = generic(x);\n"
                           ".global .attribute(.managed) .align 4 .u32 m;\n" +
                           kernel("a", "\tld.global.u64 %rd1, [p];\n") + kernel("b", "\tst.global.u32 [x], 1;\n") +
                           kernel("c", "\tst.global.u32 [m], 1;\n") + kernel("d", "\tst.global.u32 [m], 2;\n") + kernel("e", "");
  auto r = split(text);
  REQUIRE(r.pieces.size() == 3);
  CHECK(piece_of(r, "a") == piece_of(r, "b"));
  CHECK(piece_of(r, "c") == piece_of(r, "d"));
  CHECK(piece_of(r, "a") != piece_of(r, "c"));
  CHECK(count(r.pieces[piece_of(r, "c")].text, ".attribute(.managed) .align 4 .u32 m;") == 1);
  CHECK_FALSE(has(r.pieces[piece_of(r, "e")].text, ".global"));
}

TEST_CASE("comments and strings cannot fake or hide a reference") {
  const std::string text = header + ".global .align 4 .u32 g;\n" +
                           kernel("a", "\t// st.global.u32 [g], 1;\n\t/* g */\n\t.pragma \"g\";\n") +
                           kernel("b", "\tst.global.u32 [g], 1;\n");
  auto r = split(text);
  REQUIRE(r.pieces.size() == 2);
  CHECK_FALSE(has(r.pieces[piece_of(r, "a")].text, ".u32 g;"));
}

TEST_CASE("textures, surfaces and samplers are module state") {
  const std::string text = header + ".global .texref tex0;\n.global .surfref surf0;\n.global .samplerref smp0;\n" +
                           kernel("t1", "\tmov.u64 %rd1, tex0;\n") + kernel("t2", "\tmov.u64 %rd1, tex0;\n") +
                           kernel("s1", "\tmov.u64 %rd1, surf0;\n") + kernel("s2", "\tmov.u64 %rd1, surf0;\n") +
                           kernel("m1", "\tmov.u64 %rd1, smp0;\n") + kernel("m2", "\tmov.u64 %rd1, smp0;\n");
  auto r = split(text);
  REQUIRE(r.pieces.size() == 3);
  CHECK(piece_of(r, "t1") == piece_of(r, "t2"));
  CHECK(piece_of(r, "s1") == piece_of(r, "s2"));
  CHECK(piece_of(r, "m1") == piece_of(r, "m2"));
  CHECK(piece_of(r, "t1") != piece_of(r, "s1"));
}

TEST_CASE(".extern .shared is copied into each piece that uses it; kernels are not grouped by it") {
  const std::string text = header + ".extern .shared .align 16 .b8 dyn[];\n.shared .align 4 .b8 tile[64];\n" +
                           kernel("a", "\tst.shared.u32 [dyn], 1;\n") + kernel("b", "\tst.shared.u32 [dyn+4], 1;\n") +
                           kernel("c", "\tst.shared.u32 [tile], 1;\n") + kernel("d", "\tst.shared.u32 [tile+4], 1;\n");
  auto r = split(text);
  REQUIRE(r.pieces.size() == 4);
  CHECK(has(r.pieces[0].text, ".extern .shared .align 16 .b8 dyn[];"));
  CHECK(has(r.pieces[1].text, ".extern .shared .align 16 .b8 dyn[];"));
  CHECK_FALSE(has(r.pieces[2].text, "dyn"));
  CHECK(has(r.pieces[2].text, "tile[64]"));
  CHECK(has(r.pieces[3].text, "tile[64]"));
}

TEST_CASE("printf: the vprintf declaration and the format string go with the kernel that prints") {
  const std::string text =
      header +
      ".extern .func  (.param .b32 func_retval0) vprintf\n(\n\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n)\n;\n"
      ".global .align 1 .b8 $str[4] = {104, 105, 10};\n" +
      kernel("says", "\tmov.u64 %rd1, $str;\n\t{\n\t.param .b64 param0;\n\t.param .b64 param1;\n\t.param .b32 retval0;\n"
                     "\tcall.uni (retval0), vprintf, (param0, param1);\n\t}\n") +
      kernel("quiet", "");
  auto r = split(text);
  REQUIRE(r.pieces.size() == 2);
  CHECK(has(r.pieces[0].text, ".extern .func  (.param .b32 func_retval0) vprintf"));
  CHECK(has(r.pieces[0].text, "$str[4]"));
  CHECK_FALSE(has(r.pieces[1].text, "vprintf"));
}

TEST_CASE("function pointers: takers and indirect callers stay together, with the functions") {
  const std::string fns = ".func (.param .b32 r) neg(.param .b32 x)\n{\n\tret;\n}\n"
                          ".func (.param .b32 r) sq(.param .b32 x)\n{\n\tret;\n}\n";
  const std::string indirect =
      "\t{\n\t.param .b32 param0;\n\t.param .b32 retval0;\n\tprototype_1 : .callprototype (.param .b32 _) _ (.param .b32 _);\n"
      "\tcall (retval0),\n\t%rd2,\n\t(\n\tparam0\n\t)\n\t, prototype_1;\n\t}\n";
  SUBCASE("through a .global table (a vtable)") {
    const std::string text = header + fns + ".global .align 8 .u64 table[2] = {neg, sq};\n" +
                             kernel("fill", "\tmov.u64 %rd1, table;\n") + kernel("caller", indirect) + kernel("plain", "");
    auto r = split(text);
    REQUIRE(r.pieces.size() == 2);
    CHECK(r.pieces[0].kernels == std::vector<std::string>{"fill", "caller"});
    CHECK(has(r.pieces[0].text, "table[2] = {neg, sq}"));
    CHECK(has(r.pieces[0].text, ".func (.param .b32 r) neg"));
    CHECK(has(r.pieces[0].text, ".func (.param .b32 r) sq"));
    CHECK_FALSE(has(r.pieces[1].text, "neg"));
  }
  SUBCASE("taken directly with mov") {
    const std::string text = header + fns + kernel("taker", "\tmov.u64 %rd1, neg;\n") + kernel("caller", indirect) +
                             kernel("direct", "\tcall.uni (retval0), sq, (param0);\n");
    auto r = split(text);
    REQUIRE(r.pieces.size() == 2);
    CHECK(r.pieces[0].kernels == std::vector<std::string>{"taker", "caller"});
    CHECK(has(r.pieces[0].text, "neg"));
    CHECK(r.pieces[1].kernels == std::vector<std::string>{"direct"});  // a direct call takes no address
    CHECK(has(r.pieces[1].text, ".func (.param .b32 r) sq"));
    CHECK_FALSE(has(r.pieces[1].text, "neg"));
  }
}

TEST_CASE("a kernel that names another kernel stays with it") {
  const std::string text = header + kernel("child", "") + kernel("parent", "\tmov.u64 %rd1, child;\n") + kernel("other", "");
  auto r = split(text);
  REQUIRE(r.pieces.size() == 2);
  CHECK(piece_of(r, "child") == piece_of(r, "parent"));
}

TEST_CASE("debug information: every .file and the .debug_str section go into every piece") {
  const std::string text = header + kernel("a", "\t.loc 1 3 5, function_name $L__info_string0, inlined_at 1 4 2\n") +
                           kernel("b", "\t.loc 2 7 1\n") +
                           "\t.file\t1 \"/src/a.cu\"\n\t.file\t2 \"/src/b.h\", 1700000000, 1234\n"
                           "\t.section\t.debug_str\n\t{\n$L__info_string0:\n.b8 102,0\n\t}\n";
  auto r = split(text);
  REQUIRE(r.pieces.size() == 2);
  for (const auto& p : r.pieces) {
    CHECK(has(p.text, ".file\t1 \"/src/a.cu\""));
    CHECK(has(p.text, ".file\t2 \"/src/b.h\", 1700000000, 1234"));
    CHECK(has(p.text, "$L__info_string0:\n.b8 102,0\n\t}"));
  }
}

TEST_CASE("a variable no kernel uses goes into the first piece only") {
  const std::string text = header + ".global .align 4 .u32 host_only;\n" + kernel("a", "") + kernel("b", "");
  auto r = split(text);
  REQUIRE(r.pieces.size() == 2);
  CHECK(has(r.pieces[0].text, "host_only"));
  CHECK_FALSE(has(r.pieces[1].text, "host_only"));
}

TEST_CASE("relocatable PTX (-rdc) and -G debug sections come back whole, with the reason") {
  struct refused {
    const char* what;
    std::string decl;
    const char* reason;
  };
  const refused cases[] = {
      {".visible .func", ".visible .func f()\n{\n\tret;\n}\n", "-rdc"},
      {".extern .func", ".extern .func g()\n;\n", "-rdc"},
      {".weak", ".weak .func h()\n{\n\tret;\n}\n", "-rdc"},
      {".visible .global", ".visible .global .align 4 .u32 v;\n", "-rdc"},
      {".extern .global", ".extern .global .align 4 .u32 w;\n", "-rdc"},
      {".common", ".common .global .align 4 .u32 c;\n", "-rdc"},
      {"-G", "\t.section\t.debug_info\n\t{\n.b32 1\n\t}\n", "-G"},
      {"unknown directive", ".alias a, b;\n", "not something the splitter knows"},
      {"unbalanced braces", ".func f()\n{\n\tret;\n", "unbalanced"},
      {"stray punctuation", "}\n", "at module scope"},
      {"a kernel defined twice", kernel("a", ""), "defined twice"},
  };
  for (const auto& c : cases) {
    const std::string text = header + kernel("a", "") + kernel("b", "") + c.decl;
    auto r = split(text);
    INFO(std::string(c.what) << ": " << r.unsplit_reason);
    REQUIRE(r.pieces.size() == 1);
    CHECK(has(r.unsplit_reason, c.reason));
    CHECK(r.pieces[0].text == text);
    CHECK(r.pieces[0].kernels == std::vector<std::string>{"a", "b"});
  }
}

TEST_CASE("groups: at most N pieces, balanced by bytes, sharing still respected") {
  std::string text = header;
  for (int i = 0; i < 6; ++i) text += kernel("k" + std::to_string(i), std::string(std::size_t(100 * (i + 1)), ' ') + "\n");
  ptx_split_options o;
  o.mode = ptx_split_options::granularity::groups;
  o.groups = 2;
  auto r = split(text, o);
  REQUIRE(r.pieces.size() == 2);
  CHECK(r.pieces[0].kernels.size() + r.pieces[1].kernels.size() == 6);
  // Sizes 100..600 into two: 1050 each is possible; greedy largest-first reaches 1100 / 1000.
  const auto a = double(r.pieces[0].text.size()), b = double(r.pieces[1].text.size());
  CHECK(std::max(a, b) / std::min(a, b) < 1.2);
  o.groups = 100;  // more than there are kernels: one per group
  CHECK(split(text, o).pieces.size() == 6);
  o.groups = 1;
  auto one = split(text, o);
  CHECK(one.pieces.size() == 1);
  CHECK(one.unsplit_reason.empty());
  o.groups = 0;
  auto bad = split_ptx(byte_span(text), "test.ptx", o);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().reason == fatpack::fault::invalid_argument);
}

TEST_CASE("a module with one kernel or none is one piece") {
  CHECK(split(header + kernel("only", "")).pieces.size() == 1);
  auto none = split(header + ".global .u32 g;\n");
  CHECK(none.pieces.size() == 1);
  CHECK(none.pieces[0].kernels.empty());
  CHECK(has(none.unsplit_reason, "no kernels"));
}

TEST_CASE("hostile input: errors as values, limits, no recursion") {
  SUBCASE("not PTX is an error") {
    const std::string junk = "hello { world";
    auto r = split_ptx(byte_span(junk), "junk.ptx");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().reason == fatpack::fault::malformed);
  }
  SUBCASE("over the size limit") {
    ptx_split_options o;
    o.max_input_bytes = 100;
    const std::string text = header + kernel("a", "") + kernel("b", "");
    auto r = split_ptx(byte_span(text), "big.ptx", o);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().reason == fatpack::fault::unsupported);
  }
  SUBCASE("a call chain 50,000 deep walks without recursion") {
    std::string text = header + ".func f0()\n{\n\tret;\n}\n";
    for (int i = 1; i < 50000; ++i)
      text += ".func f" + std::to_string(i) + "()\n{\n\tcall.uni f" + std::to_string(i - 1) + ", ();\n\tret;\n}\n";
    text += kernel("a", "\tcall.uni f49999, ();\n") + kernel("b", "");
    auto r = split(text);
    REQUIRE(r.pieces.size() == 2);
    CHECK(count(r.pieces[0].text, ".func") == 50000);
    ptx_split_options o;
    o.max_walk_steps = 1000;
    auto bounded = split(text, o);
    CHECK(bounded.pieces.size() == 1);
    CHECK(has(bounded.unsplit_reason, "steps"));
  }
  SUBCASE("copying a big callee into many pieces is bounded") {
    std::string text = header + ".func big()\n{\n" + std::string(100000, ' ') + "\n\tret;\n}\n";
    for (int i = 0; i < 40; ++i) text += kernel("k" + std::to_string(i), "\tcall.uni big, ();\n");
    ptx_split_options o;
    o.max_output_factor = 4;
    auto r = split(text, o);
    CHECK(r.pieces.size() == 1);
    CHECK(has(r.unsplit_reason, "times the module's bytes"));
    o.max_output_factor = 64;
    CHECK(split(text, o).pieces.size() == 40);
  }
  SUBCASE("trailing NULs and a byte order mark are ignored") {
    const std::string text = "\xEF\xBB\xBF" + header + kernel("a", "") + kernel("b", "") + std::string(5, '\0');
    auto r = split(text);
    REQUIRE(r.pieces.size() == 2);
    CHECK(r.pieces[0].text.find('\0') == std::string::npos);
    CHECK(r.pieces[0].text.rfind("//", 0) == 0);
  }
}
