// Regenerates tests/data/malformed/: damaged packages the CLI tests feed to `fatpack verify` and
// `fatpack inspect`, each with a .expect file holding the regex its one-line error must match.
// Built on demand (target fatpack_gen_malformed); the outputs are committed so the tests do not
// depend on this generator being right.
//   fatpack_gen_malformed GOOD.fpk OUTDIR
// GOOD.fpk: an lz4 package with at least two entries (the tests use vadd sm_75 + compute_90), entry 1
// PTX of two kernels that split into two pieces (edited_plan). New cases may be generated from a
// fresh GOOD.fpk and only their own files committed (the others then differ in their bytes, not in
// what they test).
#include "fatpack/core/package.hpp"
#include "fatpack/core/package_writer.hpp"
#include "fatpack/core/ptx_split.hpp"

#include "../../core/src/format/package_layout.hpp"

#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

using namespace fatpack::core;
using namespace fatpack::core::layout;
using bytes = std::vector<std::uint8_t>;

static void reseal(bytes& p) {
  const std::uint64_t end = get64(&p[h_string_offset]) + get64(&p[h_string_size]);
  put64(&p[h_tables_xxh3], 0);
  put64(&p[h_tables_xxh3], xxh3(byte_span(p.data(), std::size_t(end))));
}

static void emit(const std::string& dir, const std::string& name, const bytes& p, const std::string& expect) {
  std::ofstream(dir + "/" + name + ".fpk", std::ios::binary).write(reinterpret_cast<const char*>(p.data()),
                                                                     std::streamsize(p.size()));
  std::ofstream(dir + "/" + name + ".expect") << expect << "\n";
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fatpack_gen_malformed GOOD.fpk OUTDIR\n";
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  const bytes good{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  auto pv = package_view::parse(byte_span(good), argv[1]);
  if (!pv || pv->entries().size() < 2 || pv->entries()[0].codec != codec::lz4) {
    std::cerr << "need a valid lz4 package with two entries\n";
    return 1;
  }
  const std::string dir = argv[2];
  const std::size_t e0 = header_size_v1, e1 = header_size_v1 + entry_size_v1;
  const auto& ent0 = pv->entries()[0];
  bytes p;

  emit(dir, "empty", {}, "empty file");
  p = good; p[0] = 'X';
  emit(dir, "bad_magic", p, "not a fatpack package and embeds none");
  p.assign(good.begin(), good.begin() + std::ptrdiff_t(good.size() / 2));
  emit(dir, "truncated", p, "total_size [0-9]+ runs past the end of the data .*truncated");
  p = good; put16(&p[h_major], 2); reseal(p);
  emit(dir, "future_major", p, "format version 2\\.0 is not supported");
  p = good; p[e0 + e_arch] ^= 0x01;
  emit(dir, "table_checksum", p, "header/table checksum mismatch");
  p = good; put64(&p[e0 + e_payload_offset], good.size() + 4096); reseal(p);
  emit(dir, "payload_past_end", p, "entry 0 \\(sm_75, module 'vadd'\\): payload .* runs past total_size");
  p = good; put64(&p[e0 + e_stored_size], good.size()); reseal(p);
  emit(dir, "stored_size_past_end", p, "entry 0 \\(sm_75, module 'vadd'\\): payload .* runs past total_size");
  p = good; p[std::size_t(pv->entries()[1].payload_offset) + 40] ^= 0xFF;
  emit(dir, "payload_checksum", p, "entry 1 \\(compute_90, module 'vadd'\\): stored payload checksum mismatch");
  p = good; p[e0 + e_kind] = 7; reseal(p);
  emit(dir, "unknown_kind", p, "entry 0: unknown kind 7");
  p = good; p[good.size() - 1] = 0x55;
  emit(dir, "nonzero_padding", p, "padding at the end of the package is not zero");
  p = good; put32(&p[e1 + e_module_offset], 0x40000000); reseal(p);
  emit(dir, "string_out_of_range", p, "entry 1: module name reference is out of range");
  // A block table that points past the payload, with the stored checksum made to match, so the
  // codec's own bounds check is what catches it.
  p = good;
  put32(&p[std::size_t(ent0.payload_offset)], 0x7FFFFFFF);
  put64(&p[e0 + e_stored_xxh3], xxh3(byte_span(&p[std::size_t(ent0.payload_offset)], std::size_t(ent0.stored_size))));
  reseal(p);
  emit(dir, "bad_block_table", p, "entry 0 \\(sm_75, module 'vadd'\\): lz4: block 0 .* runs past the stored payload");
  p = good; put64(&p[e0 + e_raw_size], std::uint64_t(1) << 40); reseal(p);
  emit(dir, "forged_raw_size", p, "entry 0 \\(sm_75, module 'vadd'\\): raw_size [0-9]+ needs");
  // Format 1.2: entry 1's PTX (saxpy and vadd, two pieces) with its piece plan, then one byte of the
  // last piece edited and the package written again: every checksum holds, the plan does not.
  {
    auto raw = pv->decompress(1);
    if (!raw) {
      std::cerr << raw.error().message << "\n";
      return 1;
    }
    entry_input e;
    e.target = pv->entries()[1].target;
    e.ptx_isa = pv->entries()[1].ptx_isa;
    e.module_name = "vadd";
    e.kernels.assign(pv->entries()[1].kernels.begin(), pv->entries()[1].kernels.end());
    e.raw = std::move(*raw);
    e.plan = make_piece_plan(byte_span(e.raw), e.kernels, "vadd");
    if (e.plan.pieces.size() != 2) {
      std::cerr << "entry 1 does not split into two pieces\n";
      return 1;
    }
    const auto& range = e.plan.pieces[1].ranges.back();
    std::uint8_t& byte = e.raw.at(std::size_t(range.second - 2));
    byte = byte == ' ' ? '\t' : ' ';
    auto edited = write_package("vadd", {e}, pack_options{});
    if (!edited) {
      std::cerr << edited.error().message << "\n";
      return 1;
    }
    emit(dir, "edited_plan", *edited,
         "package 'vadd': entry 0 \\(compute_90, module 'vadd'\\): piece plan: piece 1 \\(of 2\\) does not match the "
         "entry's PTX");
  }
  return 0;
}
