// Cache key derivation (key.hpp).
#include "cache/key.hpp"

#include "cache/fs.hpp"
#include "platform/log.hpp"
#include "platform/os.hpp"

#include <xxhash.h>

#include <charconv>
#include <cstdio>
#include <cstring>

namespace fatpack::detail::cache {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string code_key::hex() const { return core::hex_bytes(hash.data(), hash.size()); }

std::uint64_t code_key::lo64() const {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | hash[static_cast<std::size_t>(i)];
  return v;
}

std::string driver_id::hex() const { return core::hex16(hash); }

std::string full_key::file_name() const { return code.hex() + "-" + driver.hex() + ".fpc"; }

code_key make_code_key(const jit_key& k) {
  code_key c;
  // Everything of jit_key except the driver (the second tier); the format version first, so a
  // future format never reads these entries as hits.
  c.text = "v" + std::to_string(format_major) + "|" + k.backend;
  c.text += "|ptx=" + core::hex16(k.ptx_xxh3) + ":" + std::to_string(k.ptx_size);
  if (!k.piece_of.empty()) c.text += "|entry=" + k.piece_of;
  c.text += "|src=" + k.ptx_target.str() + "@" + k.ptx_isa.str();
  c.text += "|cc=" + std::to_string(k.target_arch) + core::variant_suffix(k.target_variant);
  c.text += "|opt=" + k.options;
  if (!k.link_parts.empty()) c.text += "|link=" + k.link_parts;
  return code_key_of_text(std::move(c.text));
}

code_key code_key_of_text(std::string text) {
  code_key c;
  c.text = std::move(text);
  XXH128_hash_t h = XXH3_128bits(c.text.data(), c.text.size());
  for (int i = 0; i < 8; ++i) {
    c.hash[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(h.high64 >> (56 - 8 * i));
    c.hash[static_cast<std::size_t>(8 + i)] = static_cast<std::uint8_t>(h.low64 >> (56 - 8 * i));
  }
  return c;
}

code_text_kind read_code_text(std::string_view text, std::string* name) {
  // The fields cache_key_of fills (ptx=<low 64 bits>:<size>, cc=<arch>, opt=source=<32 hex>) read
  // back into a jit_key; the text is one of its keys when make_code_key writes exactly it again.
  constexpr auto npos = std::string_view::npos;
  const std::string_view opt = "|opt=source=";
  const auto at = text.rfind(opt);
  const auto cc = at == npos ? npos : text.rfind("|cc=", at);
  const auto colon = text.find(':');
  auto number = [](std::string_view digits, auto& value, int base) {
    const char* end = digits.data() + digits.size();
    return !digits.empty() && std::from_chars(digits.data(), end, value, base).ptr == end;
  };
  if (at != npos && cc != npos && colon != npos) {
    const std::string_view hash = text.substr(at + opt.size());
    std::uint32_t arch = 0;
    std::uint64_t size = 0, low = 0;
    if (hash.size() == 32 && hash.find_first_not_of("0123456789abcdef") == npos && number(hash.substr(16), low, 16) &&
        number(text.substr(cc + 4, at - cc - 4), arch, 10) &&
        number(text.substr(colon + 1, text.find('|', colon) - colon - 1), size, 10)) {
      jit_key k;
      k.ptx_xxh3 = low;
      k.ptx_size = size;
      k.ptx_target = core::target{core::entry_kind::sass, arch, core::arch_variant::plain};
      k.target_arch = arch;
      k.options = "source=" + std::string(hash);
      struct known {
        const char* backend;
        const char* what;
        code_text_kind kind;
      };
      for (const known& kn : {known{"nvrtc", "NVRTC source key", code_text_kind::nvrtc_source},
                              known{"nvrtc-jit", "NVRTC PTX-path JIT key", code_text_kind::nvrtc_ptx_jit}}) {
        k.backend = kn.backend;
        if (make_code_key(k).text != text) continue;
        if (name) *name = std::string(kn.what) + " " + std::string(hash) + ", sm_" + std::to_string(arch);
        return kn.kind;
      }
    }
  }
  // A PTX entry's JIT key: this format, a JIT back end (cuLink, or nvJitLink with its version), then
  // the PTX's hash. Anything else is a text this version did not write.
  const std::string head = "v" + std::to_string(format_major) + "|";
  if (text.substr(0, head.size()) == head) {
    const std::string_view rest = text.substr(head.size());
    const auto bar = rest.find('|');
    const std::string_view backend = rest.substr(0, bar);
    if (bar != npos && rest.substr(bar, 5) == "|ptx=" && (backend == "culink" || backend.rfind("nvjitlink-", 0) == 0))
      return code_text_kind::ptx_jit;
  }
  return code_text_kind::unknown;
}

std::string describe_code_text(std::string_view text, std::size_t limit) {
  std::string name;
  const code_text_kind kind = read_code_text(text, &name);
  if (kind == code_text_kind::nvrtc_source || kind == code_text_kind::nvrtc_ptx_jit) return name;
  return quoted_excerpt(text, limit);
}

driver_id make_driver_id(int driver_version, const std::string& build) {
  driver_id d;
  d.text = std::to_string(driver_version);
  if (!build.empty()) d.text += "|" + build;
  d.hash = XXH3_64bits(d.text.data(), d.text.size());
  return d;
}

driver_id make_driver_id(int driver_version) { return make_driver_id(driver_version, machine_driver_build()); }

full_key make_full_key(const jit_key& k) { return full_key{make_code_key(k), make_driver_id(k.driver_version)}; }

std::string parse_driver_build(const std::string& text) {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue ..." or
  // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build ...":
  // the first whitespace-separated token after "Kernel Module" made of digits and dots.
  auto pos = text.find("Kernel Module");
  if (pos == std::string::npos) return {};
  std::string line = text.substr(pos, text.find('\n', pos) - pos);
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    std::string tok = line.substr(i, j - i);
    if (!tok.empty() && tok.find('.') != std::string::npos &&
        tok.find_first_not_of("0123456789.") == std::string::npos)
      return tok;
    i = j;
  }
  return {};
}

const std::string& machine_driver_build() {
  static const std::string build = [] {
    const char* env = os::getenv_path("FATPACK_DRIVER_VERSION_FILE");
    std::string path = env && *env ? env : "/proc/driver/nvidia/version";
    std::string text;
    if (read_small_file(current_fs(), path, text, 4096) != 0) return std::string();
    return parse_driver_build(text);
  }();
  return build;
}

bool parse_file_name(const std::string& name, std::array<std::uint8_t, 16>& code, std::uint64_t& driver) {
  if (name.size() != 32 + 1 + 16 + 4 || name[32] != '-' || name.compare(49, 4, ".fpc") != 0) return false;
  for (std::size_t i = 0; i < 16; ++i) {
    int a = hex_value(name[2 * i]), b = hex_value(name[2 * i + 1]);
    if (a < 0 || b < 0) return false;
    code[i] = static_cast<std::uint8_t>(a * 16 + b);
  }
  driver = 0;
  for (std::size_t i = 33; i < 49; ++i) {
    int a = hex_value(name[i]);
    if (a < 0) return false;
    driver = driver * 16 + static_cast<std::uint64_t>(a);
  }
  return true;
}

}  // namespace fatpack::detail::cache
