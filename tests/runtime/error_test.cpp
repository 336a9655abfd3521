// fatpack::error::what(): a const char* like std::exception::what(), composed from the code, the
// message and the JIT log; safe for several readers of one const error.
#include "fatpack/error.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <ostream>  // doctest prints std::error_code through operator<<
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

// What a C reader does with what(): printf("%s") into a buffer.
std::string printed(const char* s) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "%s", s);
  REQUIRE(n >= 0);
  REQUIRE(static_cast<std::size_t>(n) < sizeof buf);
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace

TEST_CASE("error::what() is a const char* with the code, the message and the log indented") {
  static_assert(std::is_same_v<decltype(std::declval<const fatpack::error&>().what()), const char*>);
  const fatpack::error e{fatpack::errc::jit_failed, 218, "module 'vadd': PTX JIT failed", "ptxas error 1\nptxas error 2"};
  CHECK(printed(e.what()) ==
        "fatpack: jit_failed: module 'vadd': PTX JIT failed\nlog:\n  ptxas error 1\n  ptxas error 2");
  CHECK(e.what() == e.what());  // composed once, the same text each time

  const fatpack::error plain{fatpack::errc::not_found, 0, "no package 'app'"};
  CHECK(printed(plain.what()) == "fatpack: not_found: no package 'app'");
  CHECK(printed(fatpack::error{}.what()) == "fatpack: ok: ");
}

TEST_CASE("error::what() follows changes, copies and the exception") {
  fatpack::error e{fatpack::errc::io, 0, "a.fpk: cannot read"};
  CHECK(printed(e.what()) == "fatpack: io: a.fpk: cannot read");
  e.message = "module 'm': " + e.message;
  CHECK(printed(e.what()) == "fatpack: io: module 'm': a.fpk: cannot read");
  e.log = "detail";
  e.code = fatpack::errc::bad_package;
  CHECK(printed(e.what()) == "fatpack: bad_package: module 'm': a.fpk: cannot read\nlog:\n  detail");

  fatpack::error copy = e;
  CHECK(copy.what() != e.what());  // its own text
  CHECK(std::strcmp(copy.what(), e.what()) == 0);
  fatpack::error assigned{fatpack::errc::cuda, 1, "other"};
  (void)assigned.what();
  assigned = e;
  CHECK(std::strcmp(assigned.what(), e.what()) == 0);

  const fatpack::exception ex(e);
  CHECK(std::strcmp(ex.what(), e.what()) == 0);
  CHECK(std::strcmp(ex.error().what(), e.what()) == 0);
}

TEST_CASE("error::what(): several threads read one const error") {
  std::string log;
  for (int i = 0; i < 200; ++i) log += "line " + std::to_string(i) + "\n";
  const fatpack::error e{fatpack::errc::jit_failed, 218, "module 'vadd': PTX JIT failed", log};
  std::vector<std::string> seen(8);
  std::vector<const char*> ptrs(8);
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        ptrs[t] = e.what();
        seen[t] = ptrs[t];
      }
    });
  for (auto& t : ts) t.join();
  for (int t = 0; t < 8; ++t) {
    CHECK(ptrs[t] == ptrs[0]);
    CHECK(seen[t] == seen[0]);
  }
  CHECK(seen[0].rfind("fatpack: jit_failed: module 'vadd': PTX JIT failed\nlog:\n  line 0\n  line 1\n", 0) == 0);
  CHECK(seen[0].find("\n  line 199") != std::string::npos);
}

TEST_CASE("errc is a std::error_code enum of the fatpack category") {
  static_assert(std::is_error_code_enum<fatpack::errc>::value);
  const std::error_code ec = fatpack::errc::jit_failed;
  CHECK(ec.category() == fatpack::error_category());
  CHECK(std::string(fatpack::error_category().name()) == "fatpack");
  CHECK(ec.value() == 11);
  CHECK(ec.message() == "jit_failed");
  CHECK(ec == fatpack::errc::jit_failed);
  CHECK(ec != fatpack::errc::load_failed);
  CHECK(ec != std::make_error_code(std::errc::io_error));
  CHECK(fatpack::make_error_code(fatpack::errc::io).message() == "io");
  CHECK_FALSE(fatpack::make_error_code(fatpack::errc::ok));  // ok is "no error"
  CHECK(fatpack::make_error_code(fatpack::errc::ok).message() == "ok");

  const fatpack::error e{fatpack::errc::bad_package, 0, "a.fpk: checksum mismatch"};
  CHECK(e.code_as_std() == fatpack::errc::bad_package);
  CHECK(e.code_as_std() == fatpack::make_error_code(fatpack::errc::bad_package));
  CHECK(e.code_as_std().message() == "bad_package");
}

TEST_CASE("error::reason: shown after the code in what()") {
  fatpack::error e{fatpack::errc::bad_package, 0, "a.fpk: entry 0 runs past the end"};
  CHECK(printed(e.what()) == "fatpack: bad_package: a.fpk: entry 0 runs past the end");
  e.reason = fatpack::fault::truncated;
  CHECK(printed(e.what()) == "fatpack: bad_package (truncated): a.fpk: entry 0 runs past the end");
}

// A result's value taken from a temporary is a value, not a reference into the temporary: a
// range-for over `fatpack::packages().value()`, or `auto&& v = f().value()`, kept a reference to a
// vector destroyed at the end of the full-expression (before, value() && returned T&&).
namespace {
fatpack::result<std::vector<std::string>> names() { return std::vector<std::string>{"a", std::string(64, 'b'), "c"}; }
}  // namespace

TEST_CASE("result::value() and operator* on a temporary return the value itself") {
  static_assert(std::is_same_v<decltype(names().value()), std::vector<std::string>>);
  static_assert(std::is_same_v<decltype(*names()), std::vector<std::string>>);
  static_assert(std::is_same_v<decltype(names().error()), fatpack::error>);
  std::string joined;
  for (const auto& n : names().value()) joined += n;  // the ASan job reads freed memory here if it dangles
  CHECK(joined == "a" + std::string(64, 'b') + "c");
  auto&& v = *names();
  CHECK(v.size() == 3);
  fatpack::result<std::vector<std::string>> failed(fatpack::error{fatpack::errc::not_found, 0, "none"});
  CHECK_THROWS_AS(std::move(failed).value(), fatpack::exception);
}
