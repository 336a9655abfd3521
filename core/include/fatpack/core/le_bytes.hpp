// The one little-endian byte accessor of the tree: every on-disk and in-memory format fatpack reads
// or writes (packages, nvcc fatbins, cubins, the cache's entry and index files) is little-endian,
// and goes through these, so a format is the same bytes on every host. Reads and writes are
// byte-wise: no alignment is needed and no host byte order leaks into a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace fatpack::core::le {

// T: an unsigned or signed integer of 1, 2, 4 or 8 bytes.
template <class T>
inline T load(const std::uint8_t* p) {
  static_assert(std::is_integral_v<T>, "le::load: integers only");
  using U = std::make_unsigned_t<T>;
  U v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v = U(v | U(U(p[i]) << (8 * i)));
  return T(v);
}

template <class T>
inline void store(std::uint8_t* p, T value) {
  static_assert(std::is_integral_v<T>, "le::store: integers only");
  using U = std::make_unsigned_t<T>;
  const U v = U(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = std::uint8_t(v >> (8 * i));
}

inline std::uint16_t get16(const std::uint8_t* p) { return load<std::uint16_t>(p); }
inline std::uint32_t get32(const std::uint8_t* p) { return load<std::uint32_t>(p); }
inline std::uint64_t get64(const std::uint8_t* p) { return load<std::uint64_t>(p); }
inline void put16(std::uint8_t* p, std::uint16_t v) { store(p, v); }
inline void put32(std::uint8_t* p, std::uint32_t v) { store(p, v); }
inline void put64(std::uint8_t* p, std::uint64_t v) { store(p, v); }

// Into a growing buffer at `off` (the buffer must already hold off + sizeof(T) bytes).
template <class T>
inline void store(std::vector<std::uint8_t>& buf, std::size_t off, T value) {
  store(buf.data() + off, value);
}

// For words that are read and written with atomic operations in place (the cache index, shared
// between processes): the value such a word holds in memory <-> the number it means. The identity
// on little-endian hosts.
template <class T>
inline T from_stored(T stored) {
  static_assert(std::is_unsigned_v<T>, "le::from_stored: unsigned integers only");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return load<T>(reinterpret_cast<const std::uint8_t*>(&stored));
#else
  return stored;
#endif
}
template <class T>
inline T to_stored(T value) {
  return from_stored(value);  // a byte swap is its own inverse
}

}  // namespace fatpack::core::le
