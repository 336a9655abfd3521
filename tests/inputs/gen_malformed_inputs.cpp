// Regenerates the small malformed inputs committed under tests/data/inputs (hand-made, no nvcc
// bytes), which inputs_test.cpp feeds to detect_input / parse_cubin / parse_ptx / import_fatbin /
// import_input. Each must give an error value (never a crash); the test checks which.
//   cmake --build build --target fatpack_gen_malformed_inputs
//   build/tests/inputs/fatpack_gen_malformed_inputs tests/data/inputs
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

using bytes = std::vector<std::uint8_t>;

void put(bytes& b, std::size_t off, std::uint64_t v, int n) {
  if (b.size() < off + std::size_t(n)) b.resize(off + std::size_t(n), 0);
  for (int i = 0; i < n; ++i) b[off + std::size_t(i)] = std::uint8_t(v >> (8 * i));
}
void align(bytes& b, std::size_t a) {
  while (b.size() % a) b.push_back(0);
}

// ELF64 header of an nvcc 13.0 cubin (EI_OSABI 0x41, EI_ABIVERSION 8, e_flags with the SM in bits 8-15).
bytes elf_header(std::uint32_t sm, std::uint16_t machine = 190) {
  bytes b(64, 0);
  const std::uint8_t ident[9] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x41, 8};
  for (int i = 0; i < 9; ++i) b[std::size_t(i)] = ident[i];
  put(b, 16, 2, 2);  // ET_EXEC
  put(b, 18, machine, 2);
  put(b, 20, 1, 4);
  put(b, 48, 0x06000004u | (sm << 8), 4);
  put(b, 52, 64, 2);  // e_ehsize
  put(b, 58, 64, 2);  // e_shentsize
  return b;
}

// A minimal well-formed cubin: sections null, .shstrtab, .strtab, .symtab, .text.<kernel>; one
// entry-function symbol. `name_off_override` != 0 replaces the symbol's st_name.
bytes mini_cubin(std::uint32_t sm, const std::string& kernel, std::uint32_t name_off_override = 0) {
  bytes b = elf_header(sm);
  std::string shstr;  // names at 1, 11, 19, 27
  for (const char* n : {"", ".shstrtab", ".strtab", ".symtab"}) shstr += std::string(n) + '\0';
  shstr += ".text." + kernel + '\0';
  const std::string str = std::string("\0", 1) + kernel + std::string("\0", 1);
  const std::size_t shstr_off = b.size();
  b.insert(b.end(), shstr.begin(), shstr.end());
  const std::size_t str_off = b.size();
  b.insert(b.end(), str.begin(), str.end());
  align(b, 8);
  const std::size_t sym_off = b.size();
  b.resize(b.size() + 48, 0);
  put(b, sym_off + 24, name_off_override ? name_off_override : 1, 4);
  b[sym_off + 24 + 4] = 0x12;  // STB_GLOBAL, STT_FUNC
  b[sym_off + 24 + 5] = 0x10;  // STO_CUDA_ENTRY
  put(b, sym_off + 24 + 6, 4, 2);
  put(b, sym_off + 24 + 16, 16, 8);
  align(b, 128);
  const std::size_t text_off = b.size();
  b.resize(b.size() + 16, 0);
  align(b, 8);
  const std::size_t shoff = b.size();
  b.resize(shoff + 5 * 64, 0);
  struct sh {
    std::uint32_t name, type;
    std::uint64_t flags, off, size;
    std::uint32_t link, info;
    std::uint64_t align, entsize;
  };
  const sh secs[5] = {{0, 0, 0, 0, 0, 0, 0, 0, 0},
                      {1, 3, 0, shstr_off, shstr.size(), 0, 0, 1, 0},
                      {11, 3, 0, str_off, str.size(), 0, 0, 1, 0},
                      {19, 2, 0, sym_off, 48, 2, 1, 8, 24},
                      {27, 1, 6, text_off, 16, 3, 0, 128, 0}};
  for (std::size_t i = 0; i < 5; ++i) {
    const std::size_t h = shoff + i * 64;
    put(b, h + 0, secs[i].name, 4);
    put(b, h + 4, secs[i].type, 4);
    put(b, h + 8, secs[i].flags, 8);
    put(b, h + 24, secs[i].off, 8);
    put(b, h + 32, secs[i].size, 8);
    put(b, h + 40, secs[i].link, 4);
    put(b, h + 44, secs[i].info, 4);
    put(b, h + 48, secs[i].align, 8);
    put(b, h + 56, secs[i].entsize, 8);
  }
  put(b, 40, shoff, 8);
  put(b, 60, 5, 2);
  put(b, 62, 1, 2);
  return b;
}

// One container holding one entry with the given header fields and payload.
bytes fatbin(std::uint16_t kind, std::uint64_t flags, const bytes& payload, std::uint64_t padded,
             std::uint32_t csize, std::uint64_t usize, std::uint32_t arch = 90) {
  bytes b(16 + 64, 0);
  put(b, 0, 0xBA55ED50u, 4);
  put(b, 4, 1, 2);
  put(b, 6, 16, 2);
  put(b, 16 + 0x00, kind, 2);
  put(b, 16 + 0x02, 0x0101, 2);
  put(b, 16 + 0x04, 0x40, 4);
  put(b, 16 + 0x08, padded ? padded : (payload.size() + 7) / 8 * 8, 8);
  put(b, 16 + 0x10, csize, 4);
  put(b, 16 + 0x18, kind == 1 ? 0 : 8, 2);
  put(b, 16 + 0x1A, kind == 1 ? 9 : 1, 2);
  put(b, 16 + 0x1C, arch, 4);
  put(b, 16 + 0x28, flags, 8);
  put(b, 16 + 0x38, usize, 8);
  b.insert(b.end(), payload.begin(), payload.end());
  align(b, 8);
  put(b, 8, b.size() - 16, 8);
  return b;
}

bool write(const std::string& dir, const std::string& name, const bytes& b) {
  std::ofstream f(dir + "/" + name, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  if (!f) std::fprintf(stderr, "%s/%s: cannot write\n", dir.c_str(), name.c_str());
  return bool(f);
}
bytes text(const std::string& s) { return bytes(s.begin(), s.end()); }

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "tests/data/inputs";
  bool ok = true;

  // cubins
  bytes h = elf_header(90);
  h.resize(40);
  ok &= write(dir, "elf_header_truncated.cubin", h);
  bytes past = elf_header(90);
  put(past, 40, 0x1000, 8);  // e_shoff far past the 64 bytes present
  put(past, 60, 4, 2);
  put(past, 62, 1, 2);
  ok &= write(dir, "shdr_past_end.cubin", past);
  bytes sec = mini_cubin(90, "k");
  put(sec, std::size_t(sec[40] | sec[41] << 8) + 3 * 64 + 32, 0x100000, 8);  // .symtab sh_size 1 MiB
  ok &= write(dir, "section_past_end.cubin", sec);
  ok &= write(dir, "bad_symbol_name.cubin", mini_cubin(90, "k", 0x4000));
  ok &= write(dir, "sm_99.cubin", mini_cubin(99, "k"));
  ok &= write(dir, "host_elf.o", elf_header(90, 62));  // x86-64: not a cubin

  // fatbins
  const bytes eight(8, 0);
  bytes e_past = fatbin(2, 0x11, eight, 8, 0, 0);
  put(e_past, 16 + 0x08, 0x10000, 8);  // payload size past the container end
  ok &= write(dir, "entry_past_end.fatbin", e_past);
  bytes c_past = fatbin(2, 0x11, eight, 8, 0, 0);
  put(c_past, 8, 0x1000, 8);  // container size past the end of the file
  ok &= write(dir, "container_past_end.fatbin", c_past);
  // ZSTD frame header declaring 4096 bytes (single segment, 2-byte size 4096-256), then garbage.
  const bytes zstd = {0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x00, 0x0f, 0xff, 0xff, 0xff, 0x13, 0x37, 0xde, 0xad, 0xbe, 0xef};
  ok &= write(dir, "bad_zstd.fatbin", fatbin(2, 0x8011, zstd, 16, 16, 4096));
  const bytes lz4(16, 0xff);
  ok &= write(dir, "bad_lz4.fatbin", fatbin(2, 0x2011, lz4, 16, 16, 4096));
  const bytes zlib = {0x78, 0x9c, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06};
  ok &= write(dir, "zlib.fatbin", fatbin(2, 0x1011, zlib, 8, 8, 64));
  ok &= write(dir, "a_and_f.fatbin", fatbin(2, 0x300011, mini_cubin(100, "k"), 0, 0, 0, 100));

  // PTX and other text
  ok &= write(dir, "no_target.ptx", text(".version 9.0\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n"));
  ok &= write(dir, "bad_version.ptx", text(".version nine\n.target sm_90\n.address_size 64\n"));
  ok &= write(dir, "unterminated_comment.ptx", text(".version 9.0\n.target sm_90\n/* never closed\n.entry k()\n{\n}\n"));
  ok &= write(dir, "garbage.bin", bytes{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x02, 0x03});
  return ok ? 0 : 1;
}
