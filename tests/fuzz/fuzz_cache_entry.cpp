// libFuzzer target: the JIT cache's entry reader (docs/cache.md §3). Entry files live in a directory
// other processes write to; a damaged or hostile file must be a miss with a reason, never a crash or
// bytes. Seeds: entry files written by `fatpack warm` (scripts/fuzz.sh makes them).
#include "cache/entry.hpp"
#include "cache/key.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fatpack::detail::cache;
  const fatpack::core::byte_span bytes(data, size);
  entry_header h;
  if (parse_header(bytes, size, h)) return 0;  // refused: fine
  // The header is sound: decode against the key it names (as a lookup by that key would) and
  // against another key (as a lookup that found a wrong file under its name would).
  std::string driver_text, problem;
  (void)cubin_sm_word(bytes);
  code_key named;  // the key the file says it holds (its hash and text)
  named.hash = h.code_hash;
  if (std::uint64_t(h.header_size) + h.code_text_size <= size)
    named.text.assign(reinterpret_cast<const char*>(data) + h.header_size, h.code_text_size);
  const code_key other = code_key_of_text("v1|culink|fuzz");
  for (const code_key* k : {static_cast<const code_key*>(&named), &other}) {
    expected_key want;
    want.code = k;
    (void)decode_entry(bytes, want, h, driver_text, problem);
  }
  return 0;
}
