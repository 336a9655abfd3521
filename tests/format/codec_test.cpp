// The blocked codecs (docs/format.md §5): round trips, raw-stored blocks, parallel decoding, and
// damaged payloads rejected without writing outside the output.
#include "fatpack/core/codec.hpp"

#include <doctest/doctest.h>

#include <random>

#include <xxhash.h>

using namespace fatpack::core;

namespace {

std::vector<std::uint8_t> compressible(std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::uint8_t((i / 7) % 13 + (i % 3));
  return v;
}
std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = std::uint8_t(rng());
  return v;
}

}  // namespace

TEST_CASE("every codec round-trips, across block boundaries and thread counts") {
  for (codec c : {codec::none, codec::lz4, codec::zstd}) {
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(4095), std::size_t(4096), std::size_t(4097),
                          std::size_t(100000)}) {
      for (unsigned threads : {1u, 3u}) {
        CAPTURE(codec_name(c));
        CAPTURE(n);
        CAPTURE(threads);
        const auto raw = compressible(n);
        auto stored = compress(c, c == codec::lz4 ? 9 : 3, 4096, byte_span(raw));
        REQUIRE(stored);
        std::vector<std::uint8_t> out(n + 16, 0xEE);
        REQUIRE(decompress(c, c == codec::none ? 0 : 4096, byte_span(*stored), out.data(), n, threads));
        CHECK(std::equal(raw.begin(), raw.end(), out.begin()));
        // Nothing written past raw_size.
        for (std::size_t i = n; i < out.size(); ++i) CHECK(out[i] == 0xEE);
      }
    }
  }
}

TEST_CASE("compressible data shrinks; incompressible blocks are stored raw") {
  const auto raw = compressible(1 << 20);
  auto lz = compress(codec::lz4, -1, 0, byte_span(raw));
  auto zs = compress(codec::zstd, -1, 0, byte_span(raw));
  REQUIRE(lz);
  REQUIRE(zs);
  CHECK(lz->size() < raw.size() / 4);
  CHECK(zs->size() < raw.size() / 4);

  const auto noise = random_bytes(10000, 1);
  auto stored = compress(codec::lz4, -1, 4096, byte_span(noise));
  REQUIRE(stored);
  // 3 blocks: a 12-byte table + the blocks verbatim.
  CHECK(stored->size() == 12 + noise.size());
  std::vector<std::uint8_t> out(noise.size());
  REQUIRE(decompress(codec::lz4, 4096, byte_span(*stored), out.data(), out.size()));
  CHECK(out == noise);
}

TEST_CASE("damaged payloads are errors, never overruns") {
  const auto raw = compressible(20000);
  for (codec c : {codec::lz4, codec::zstd}) {
    CAPTURE(codec_name(c));
    auto stored = compress(c, -1, 8192, byte_span(raw));
    REQUIRE(stored);
    std::vector<std::uint8_t> out(raw.size());

    SUBCASE("block size past the payload") {
      auto bad = *stored;
      bad[0] = 0xFF;
      bad[1] = 0xFF;
      bad[2] = 0xFF;
      auto st = decompress(c, 8192, byte_span(bad), out.data(), out.size());
      REQUIRE_FALSE(st);
      CHECK(st.error().reason == errc::malformed);
      CHECK(st.error().message.find("runs past") != std::string::npos);
    }
    SUBCASE("truncated payload") {
      auto bad = *stored;
      bad.resize(bad.size() - 5);
      CHECK_FALSE(decompress(c, 8192, byte_span(bad), out.data(), out.size()));
    }
    SUBCASE("flipped bits inside a compressed block") {
      auto bad = *stored;
      for (std::size_t i = 12; i < 40 && i < bad.size(); ++i) bad[i] ^= 0x5A;
      auto st = decompress(c, 8192, byte_span(bad), out.data(), out.size());
      // A decoder may or may not notice flipped literals; the package layer's XXH3 catches the rest.
      if (!st) CHECK(st.error().reason == errc::codec);
    }
    SUBCASE("raw size larger than the blocks describe") {
      std::vector<std::uint8_t> big(raw.size() + 8192);
      CHECK_FALSE(decompress(c, 8192, byte_span(*stored), big.data(), big.size()));
    }
    SUBCASE("block size 0") { CHECK_FALSE(decompress(c, 0, byte_span(*stored), out.data(), out.size())); }
  }
}

TEST_CASE("core::xxh3 (AVX2 where the CPU has it) is the library's XXH3-64 for every length and alignment") {
  // Every checksum in the format and the cache goes through core::xxh3; on x86-64 it runs a copy of
  // xxHash compiled for AVX2 (src/format/xxh3_avx2.c). It must give the library's value bit for bit.
  std::vector<std::uint8_t> bytes((1u << 20) + 64);
  std::mt19937_64 rng(7);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  for (std::size_t n : {0, 1, 3, 16, 17, 128, 129, 240, 241, 1000, 1024, 4096, 65536 + 7, 1 << 20})
    for (std::size_t at : {0, 1, 31}) {
      CAPTURE(n);
      CAPTURE(at);
      CHECK(fatpack::core::xxh3(fatpack::core::byte_span(bytes.data() + at, n)) == XXH3_64bits(bytes.data() + at, n));
    }
}

TEST_CASE("codec names and levels") {
  CHECK(parse_codec("lz4").value() == codec::lz4);
  CHECK(parse_codec("zstd").value() == codec::zstd);
  CHECK(parse_codec("none").value() == codec::none);
  CHECK_FALSE(parse_codec("gzip"));
  const std::vector<std::uint8_t> raw(100, 1);
  CHECK_FALSE(compress(codec::lz4, 13, 0, byte_span(raw)));
  CHECK_FALSE(compress(codec::zstd, 99, 0, byte_span(raw)));
  CHECK(xxh3(byte_span(raw)) != xxh3(byte_span(compressible(100))));
}
