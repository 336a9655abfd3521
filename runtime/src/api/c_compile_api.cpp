// The C API of run-time compilation (fatpack.h, "run-time compilation") over fatpack::compile. Errors
// go to the per-thread message of the C API (fatpack_last_error); no exception crosses it.
#include "fatpack/fatpack.h"

#include "fatpack/compile.hpp"
#include "api/c_status.hpp"

#include <cstddef>
#include <exception>
#include <new>
#include <string>
#include <vector>

struct fatpack_program {
  fatpack::compiled c;
  std::string report;
};

namespace {

constexpr std::size_t k_compile_args_v1 = sizeof(fatpack_compile_args);
static_assert(offsetof(fatpack_compile_args, struct_size) == 0, "struct_size comes first");
static_assert(static_cast<int>(fatpack::compile_path::cache_hit) == FATPACK_COMPILE_CACHE_HIT &&
                  static_cast<int>(fatpack::compile_path::nvrtc_sass) == FATPACK_COMPILE_NVRTC_SASS &&
                  static_cast<int>(fatpack::compile_path::nvrtc_ptx) == FATPACK_COMPILE_NVRTC_PTX,
              "fatpack_compile_path_id has compile_path's numbers");

using fatpack::detail::c_api::fail;
using fatpack::detail::c_api::guarded;
using fatpack::detail::c_api::ok;
fatpack_status fail(const std::string& message) { return fail(fatpack::errc::invalid_argument, message); }

// `n` strings of `a`, none null.
bool take(const char* const* a, std::size_t n, std::vector<std::string>& out, const char* what, std::string& why) {
  if (n == 0) return true;
  if (!a) {
    why = std::string("fatpack_compile: ") + what + ": " + std::to_string(n) + " given but a null array";
    return false;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!a[i]) {
      why = std::string("fatpack_compile: ") + what + " " + std::to_string(i) + " is null";
      return false;
    }
    out.emplace_back(a[i]);
  }
  return true;
}

// The manifest's files, one "\ndependency=PATH" line each after the count (before, the C report gave
// only the count that compile_report::dependencies lists). A path is outside text: a control byte
// in it would end the line, so such bytes are shown as '?'.
std::string dependency_lines(const std::vector<std::string>& files) {
  std::string out;
  for (const auto& f : files) {
    std::string line = f;
    for (char& c : line)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    out += "\ndependency=" + line;
  }
  return out;
}

}  // namespace

extern "C" {

fatpack_status fatpack_compile(const fatpack_compile_args* args, fatpack_program** out) {
  return guarded([&]() -> fatpack_status {
    if (!out) return fail("fatpack_compile: null output pointer");
    *out = nullptr;
    if (!args || args->struct_size < k_compile_args_v1)
      return fail("fatpack_compile: args is null or its struct_size is below " + std::to_string(k_compile_args_v1) +
                  " (initialize it with FATPACK_COMPILE_ARGS_INIT)");
    if (!args->source) return fail("fatpack_compile: null source");
    fatpack::compile_request req;
    req.source = args->source;
    if (args->name) req.name = args->name;
    std::string why;
    std::vector<std::string> names, contents;
    if (!take(args->header_names, args->num_headers, names, "header name", why) ||
        !take(args->header_contents, args->num_headers, contents, "header contents", why) ||
        !take(args->include_paths, args->num_include_paths, req.include_paths, "include path", why) ||
        !take(args->options, args->num_options, req.options, "option", why) ||
        !take(args->name_expressions, args->num_name_expressions, req.name_expressions, "name expression", why))
      return fail(why);
    for (std::size_t i = 0; i < names.size(); ++i) req.headers.push_back({names[i], contents[i]});
    fatpack::compile_options o;
    o.device = args->device;
    o.use_cache = args->no_cache == 0;
    auto c = fatpack::compile(req, o);
    if (!c) return fail(c.error());
    auto* p = new fatpack_program{std::move(c.value()), {}};
    const fatpack::compile_report& r = p->c.report;
    p->report = std::string("path=") + fatpack::compile_path_name(r.path) + "\ntarget=" + r.target +
                "\nreason=" + r.reason + "\ncompiler=" + r.compiler + "\nnvrtc_version=" + r.nvrtc_version +
                "\ncache_key=" + r.cache_key + "\nstored=" + (r.stored ? "1" : "0") + "\nnot_cached=" + r.not_cached +
                "\ndependencies=" + std::to_string(r.dependencies.size()) + dependency_lines(r.dependencies) +
                "\nnvrtc_ms=" + std::to_string(r.nvrtc_ms) +
                "\ntotal_ms=" + std::to_string(r.total_ms) + "\nlocate_ms=" + std::to_string(r.locate_ms) +
                "\nscan_ms=" + std::to_string(r.scan_ms) + "\nlookup_ms=" + std::to_string(r.lookup_ms) +
                "\nregister_ms=" + std::to_string(r.register_ms) + "\nload_ms=" + std::to_string(r.load_ms) + "\n";
    if (!r.log.empty()) p->report += "log=\n" + r.log + (r.log.back() == '\n' ? "" : "\n");  // last: NVRTC's lines
    *out = p;
    return ok();
  });
}

void fatpack_program_release(fatpack_program* program) { delete program; }

fatpack_status fatpack_program_kernel(const fatpack_program* program, const char* name, struct CUkern_st** out) {
  return guarded([&]() -> fatpack_status {
    if (!program || !name || !out) return fail("fatpack_program_kernel: null argument");
    auto k = program->c.kernel(name);
    if (!k) return fail(k.error());
    *out = *k;
    return ok();
  });
}

struct CUlib_st* fatpack_program_library(const fatpack_program* program) {
  return program ? program->c.library.handle() : nullptr;
}

int fatpack_program_path(const fatpack_program* program) {
  return program ? static_cast<int>(program->c.report.path) : -1;
}

const char* fatpack_program_report(const fatpack_program* program) { return program ? program->report.c_str() : ""; }

}  // extern "C"
