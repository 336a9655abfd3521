// Kernels by C++ name (core/src/inputs/kernel_names.cpp, demangle.cpp): real nvcc output
// (tests/kernels/names.cu) and real g++ symbols, the matching rules, and hostile names.
#include "fatpack/core/input.hpp"
#include "fatpack/core/kernel_names.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

namespace core = fatpack::core;

namespace {

std::vector<std::string> kernels_of(const std::string& file) {
  std::ifstream f(std::string(FATPACK_TEST_ARTIFACTS) + "/" + file, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot read " << file);
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto r = core::import_input(core::byte_span(bytes), file, "names");
  REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? std::string() : r.error().message));
  REQUIRE(r->size() == 1);
  return r->front().kernels;
}

// The names c++filt prints for names.cu's kernels, without the return type.
const std::set<std::string> k_names_cu = {
    "mylib::affine<float, 256>(float const*, float*, int)",
    "mylib::affine<double, 128>(double const*, double*, int)",
    "mylib::nested<mylib::vec<mylib::vec<float> > >(mylib::vec<mylib::vec<float> >*, unsigned long)",
    "mylib::scale(float*, float)",
    "mylib::scale(double*, double)",
    "mylib::fill(int volatile*, int const&)",
    "(anonymous namespace)::hidden(int*)",
    "apply<launch_apply(float*)::{lambda(float)#1}>(launch_apply(float*)::{lambda(float)#1}, float*)",
    "plain_c",
    "scale_c",
};

std::string found(const std::vector<core::kernel_name>& ks, const std::string& query) {
  auto m = core::match_kernel(query, ks);
  if (m.what != core::kernel_match::outcome::found) return "<" + std::to_string(int(m.what)) + ">";
  return ks.at(m.matches.at(0)).display;
}

}  // namespace

TEST_CASE("kernel names: nvcc's cubin and PTX demangle as c++filt prints them") {
  for (const char* file : {"names.sm_90.cubin", "names.compute_90.ptx"}) {
    CAPTURE(file);
    const auto ks = core::describe_kernels(kernels_of(file));
    std::set<std::string> shown;
    for (const auto& k : ks) {
      shown.insert(k.display);
      if (k.symbol.rfind("_Z", 0) == 0) {
        CHECK(k.demangled != k.symbol);
        CHECK(k.demangled.size() >= k.display.size());
        CHECK(k.demangled.compare(k.demangled.size() - k.display.size(), std::string::npos, k.display) == 0);
      } else {
        CHECK(k.demangled == k.symbol);  // extern "C"
        CHECK(k.params.empty());
      }
    }
    CHECK(shown == k_names_cu);
    // Template functions demangle with their return type; the rest without.
    for (const auto& k : ks)
      if (k.display.rfind("mylib::affine", 0) == 0) CHECK(k.demangled == "void " + k.display);
  }
}

TEST_CASE("kernel names: queries against nvcc's names") {
  const auto ks = core::describe_kernels(kernels_of("names.sm_90.cubin"));
  const std::string affine_f = "mylib::affine<float, 256>(float const*, float*, int)";
  // Exact mangled names and extern "C" names.
  for (const auto& k : ks) CHECK(found(ks, k.symbol) == k.display);
  CHECK(found(ks, "plain_c") == "plain_c");
  // Demangled, with and without parameters, return type, whitespace, cv placement, parameter names.
  CHECK(found(ks, "mylib::affine<float, 256>") == affine_f);
  CHECK(found(ks, "mylib::affine<float,256>") == affine_f);
  CHECK(found(ks, " mylib :: affine < float , 256 > ") == affine_f);
  CHECK(found(ks, "mylib::affine<float, 256>(const float*, float*, int)") == affine_f);
  CHECK(found(ks, "mylib::affine<float, 256>(float const*, float*, int)") == affine_f);
  CHECK(found(ks, "void mylib::affine<float, 256>(float const*, float*, int)") == affine_f);
  CHECK(found(ks, "mylib::affine<float, 256>(const float* __restrict__ in, float* out, const int n)") == affine_f);
  CHECK(found(ks, "mylib::affine(const float*, float*, int)") == affine_f);  // the parameters pick the instantiation
  CHECK(found(ks, "::mylib::affine<float, 256>") == affine_f);
  CHECK(found(ks, "mylib::affine<double, 128>") == "mylib::affine<double, 128>(double const*, double*, int)");
  // Nested templates with or without the space c++filt puts between closing brackets, long spellings.
  const std::string nested = "mylib::nested<mylib::vec<mylib::vec<float> > >(mylib::vec<mylib::vec<float> >*, unsigned long)";
  CHECK(found(ks, "mylib::nested<mylib::vec<mylib::vec<float>>>") == nested);
  CHECK(found(ks, "mylib::nested<mylib::vec<mylib::vec<float>>>(mylib::vec<mylib::vec<float>>* v, unsigned long int n)") ==
        nested);
  CHECK(found(ks, "mylib::nested(mylib::vec<mylib::vec<float>>*, long unsigned)") == nested);
  // Overloads: by parameters; cv on pointees and references, volatile.
  CHECK(found(ks, "mylib::scale(float*, float)") == "mylib::scale(float*, float)");
  CHECK(found(ks, "mylib::scale(double *p, double s)") == "mylib::scale(double*, double)");
  CHECK(found(ks, "mylib::fill(volatile int*, const int&)") == "mylib::fill(int volatile*, int const&)");
  CHECK(found(ks, "mylib::fill") == "mylib::fill(int volatile*, int const&)");
  // Anonymous namespace and a lambda's type.
  CHECK(found(ks, "(anonymous namespace)::hidden") == "(anonymous namespace)::hidden(int*)");
  CHECK(found(ks, "(anonymous namespace)::hidden(int*)") == "(anonymous namespace)::hidden(int*)");
  CHECK(found(ks, "apply").rfind("apply<launch_apply(float*)::{lambda(float)#1}>", 0) == 0);
  CHECK(found(ks, "apply<launch_apply(float*)::{lambda(float)#1}>").rfind("apply<", 0) == 0);

  SUBCASE("ambiguous: every overload or instantiation, in list order, with symbols") {
    auto m = core::match_kernel("mylib::scale", ks);
    CHECK(m.what == core::kernel_match::outcome::ambiguous);
    REQUIRE(m.matches.size() == 2);
    const std::string list = core::list_kernels(ks, m.matches, true);
    CHECK(list.find("mylib::scale(float*, float) [_ZN5mylib5scaleEPff]") != std::string::npos);
    CHECK(list.find("mylib::scale(double*, double) [_ZN5mylib5scaleEPdd]") != std::string::npos);
    CHECK(core::match_kernel("mylib::affine", ks).matches.size() == 2);
    CHECK(core::match_kernel("mylib::affine<float>", ks).what == core::kernel_match::outcome::not_found);
  }
  SUBCASE("not found") {
    for (const char* q : {"scale", "mylib::scale(int*, int)", "mylib::affine<float, 255>", "plain_c(float*)",
                          "mylib::affine<float, 256>(float*, float*, int)", "hidden", "_ZN5mylib5scaleEPfi",
                          "mylib::vec", "void", "const", "<", ">>>", "(((", ")", "::", "operator()"}) {
      CAPTURE(q);
      CHECK(core::match_kernel(q, ks).what == core::kernel_match::outcome::not_found);
    }
    CHECK(core::list_kernels(ks, false).find("mylib::affine<float, 256>(float const*, float*, int), ") != std::string::npos);
  }
}

// A cubin's symbols are outside input: any byte but NUL. A list in a message shows control bytes
// escaped (before: a raw line break or terminal escape sequence went into the message).
TEST_CASE("kernel names: list_kernels escapes control bytes and bounds each name") {
  const std::vector<std::string> symbols = {"ok", "v\x1b[7mX\nfatpack: fine", std::string(5000, 'a')};
  const auto ks = core::describe_kernels(symbols);
  const std::string list = core::list_kernels(ks, false);
  CHECK(list.find('\x1b') == std::string::npos);
  CHECK(list.find('\n') == std::string::npos);
  CHECK(list.find("v\\x1b[7mX\\x0afatpack: fine") != std::string::npos);
  CHECK(list.size() < 2 * core::k_max_listed_name);
}

TEST_CASE("kernel names: g++ symbols: operators, non-type and enum arguments, packs, references") {
  struct row {
    const char* symbol;
    const char* display;
    const char* query;
  };
  const row rows[] = {
      {"_ZN5mylibplIfEENS_3vecIT_EERKS3_S5_",
       "mylib::operator+<float>(mylib::vec<float> const&, mylib::vec<float> const&)", "mylib::operator+<float>"},
      {"_ZN5mylib3tagILNS_5colorE2ELb1EEEvv", "mylib::tag<(mylib::color)2, true>()", "mylib::tag<(mylib::color)2,true>(void)"},
      {"_ZN5mylib4callINS_7functorEEEvT_OiPKPKc", "mylib::call<mylib::functor>(mylib::functor, int&&, char const* const*)",
       "mylib::call(mylib::functor f, int&& i, const char* const* s)"},
      {"_Z4packIJifEEvDpT_", "pack<int, float>(int, float)", "pack<int, float>"},
      {"_Z1fILc65ELb1ELj3ELm4ELin5EEvv", "f<(char)65, true, 3u, 4ul, -5>()", "f<(char)65, true, 3U, 4UL, -5>()"},
      {"_Z1fIPFviEEvT_", "f<void (*)(int)>(void (*)(int))", "f<void(*)(int)>"},
      {"_ZNSt6vectorIiSaIiEE9push_backERKi", "std::vector<int, std::allocator<int> >::push_back(int const&)",
       "std::vector<int, std::allocator<int>>::push_back(const int&)"},
  };
  std::vector<std::string> symbols;
  for (const auto& r : rows) symbols.push_back(r.symbol);
  const auto ks = core::describe_kernels(symbols);
  for (std::size_t i = 0; i < ks.size(); ++i) {
    CAPTURE(rows[i].symbol);
    CHECK(ks[i].display == rows[i].display);
    CHECK(found(ks, rows[i].query) == rows[i].display);
  }
}

TEST_CASE("kernel names: hostile names never crash, stay bounded, and do not match by accident") {
  const auto ks = core::describe_kernels(kernels_of("names.compute_90.ptx"));
  SUBCASE("empty and over-long queries") {
    CHECK(core::match_kernel("", ks).what == core::kernel_match::outcome::bad_query);
    auto m = core::match_kernel(std::string(core::k_max_kernel_query + 1, 'a'), ks);
    CHECK(m.what == core::kernel_match::outcome::bad_query);
    CHECK(m.problem.find("at most") != std::string::npos);
  }
  SUBCASE("deep nesting in a query") {
    std::string q = "mylib::affine";
    for (int i = 0; i < 10000; ++i) q += "<vec";
    for (int i = 0; i < 10000; ++i) q += ">";
    CHECK(core::match_kernel(q, ks).what == core::kernel_match::outcome::not_found);
    std::string open(core::k_max_kernel_query, '(');
    CHECK(core::match_kernel(open, ks).what == core::kernel_match::outcome::not_found);
    std::string cv;
    for (int i = 0; i < 4000; ++i) cv += "const a<b<c<d<";  // every const scans a type
    CHECK(core::match_kernel(cv, ks).what == core::kernel_match::outcome::not_found);
  }
  SUBCASE("random bytes and random tokens") {
    std::mt19937 rng(11);
    const char* words[] = {"const", "volatile", "<", ">", "(", ")", "::", ",", "*", "&", "&&", "{", "}", "[", "]",
                           "operator", "unsigned", "long", "int", "mylib", "affine", "float", "256", "void", "...",
                           "(anonymous namespace)", "#", "\"\"", "new", "~", " "};
    for (int i = 0; i < 3000; ++i) {
      std::string q;
      const int n = 1 + int(rng() % 40);
      for (int j = 0; j < n; ++j) {
        if (i % 2) q += char(rng() % 256);
        else q += words[rng() % (sizeof words / sizeof *words)];
      }
      auto m = core::match_kernel(q, ks);
      CHECK(m.what != core::kernel_match::outcome::bad_query);
    }
  }
  SUBCASE("symbols that do not demangle are shown and matched as they are") {
    const auto bad = core::describe_kernels({"_Zgarbage", "_Z", "_ZN5mylib", std::string("_Z1f\0v", 6), "_Z1fI" + std::string(200, 'P') + "iEvv"});
    for (const auto& k : bad) {
      CAPTURE(k.symbol);
      CHECK(found(bad, k.symbol) == k.display);
    }
    CHECK(bad[0].display == "_Zgarbage");
    CHECK(bad[1].display == "_Z");
    CHECK(bad[4].display.rfind("f<int*", 0) == 0);  // 200 deep, but demangled (c++filt prints it)
  }
  SUBCASE("a construct the size bound does not model (an expression): demangled only when short") {
    CHECK(core::describe_kernel("_Z1fILi1EEvPAplT_Li1E_i").display == "f<1>(int (*) [(1)+(1)])");
    // Over 256 bytes, its nesting is not known to be small: kept mangled (c++filt would print it).
    const std::string long_name = "_Z300" + std::string(300, 'f') + "ILi1EEvPAplT_Li1E_i";
    CHECK(core::describe_kernel(long_name).display == long_name);
    CHECK(core::demangle_symbol("_Z300" + std::string(300, 'f') + "ILi1EEvPii").size() > 300);  // modelled: demangled
  }
  SUBCASE("huge nesting in a symbol: over the depth bound, kept mangled") {
    std::string deep = "_Z1fI";
    for (int i = 0; i < 4000; ++i) deep += 'P';
    deep += "iEvv";
    CHECK(core::describe_kernel(deep).display == deep);
    std::string longer = "_Z" + std::to_string(core::k_max_demangle_input) + std::string(core::k_max_demangle_input, 'a') + "v";
    CHECK(core::describe_kernel(longer).display == longer);
  }
  SUBCASE("back-reference bombs: a few hundred bytes that would print gigabytes stay mangled, at once") {
    const char* digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    for (int levels : {16, 24, 34}) {
      std::string bomb = "_Z1f1A";  // A, A<A,A>, A<A<A,A>,A<A,A>>, ...: 2^levels
      for (int i = 0; i < levels; ++i) {
        const std::string prev = i == 0 ? "S_" : std::string("S") + digits[i - 1] + "_";
        bomb += "S_I" + prev + prev + "E";
      }
      const auto t0 = std::chrono::steady_clock::now();
      const auto k = core::describe_kernel(bomb);
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      CAPTURE(levels);
      CHECK((k.display == bomb));  // (not printed: it is long)
      CHECK(ms < 100);
    }
    // The same through template parameters: each argument the previous twice.
    std::string tbomb = "_Z1fI1A";
    for (int i = 0; i < 30; ++i) tbomb += "S_I" + (i == 0 ? std::string("T_") : "T" + std::to_string(i - 1) + "_") +
                                          (i == 0 ? std::string("T_") : "T" + std::to_string(i - 1) + "_") + "E";
    tbomb += "EvT29_";
    CHECK(core::describe_kernel(tbomb).display == tbomb);
    // Smaller ones still demangle: the bound does not refuse everything with back-references.
    std::string small = "_Z1f1A";
    for (int i = 0; i < 12; ++i) {
      const std::string prev = i == 0 ? "S_" : std::string("S") + digits[i - 1] + "_";
      small += "S_I" + prev + prev + "E";
    }
    const auto k = core::describe_kernel(small);
    CHECK(k.display.rfind("f(A, A<A, A>, ", 0) == 0);
    CHECK(k.display.size() > 50000);  // 2^13 - 1 A's, with ", " and "<>"
    CHECK(k.display.size() <= core::k_max_demangled_size);
  }
}
