// The JIT cache's pieces in one process: keys, the entry format under corruption, the index under
// damage, locks, eviction order, every fault through the file-system seam (ENOSPC, EDQUOT, EROFS,
// EACCES, EIO, ENOLCK, NFS, setuid, foreign owner), the admin API, and warm with CU_JIT_TARGET.
#include "admin_impl.hpp"
#include "cache/config.hpp"
#include "cache/directory.hpp"
#include "cache/disk_cache.hpp"
#include "cache/entry.hpp"
#include "cache/eviction.hpp"
#include "cache/fs.hpp"
#include "cache/holders.hpp"
#include "cache/key.hpp"
#include "cache/locks.hpp"
#include "cache/stats.hpp"
#include "cache/store.hpp"
#include "jit/service.hpp"
#include "remote/remote_cache.hpp"

#include "../runtime/test_support.hpp"

#include "fatpack/core/le_bytes.hpp"
#include "fatpack/fatpack.hpp"

#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cerrno>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

using namespace fatpack::detail;
using namespace fatpack::detail::cache;
using fatpack_test::artifact;
using fatpack_test::read_file;
using fatpack_test::temp_dir;

namespace {

// Before anything loads the driver (warm test): the fake, with two devices.
const bool g_env = [] {
  setenv("FATPACK_LIBCUDA", FAKECUDA_PATH, 1);
  setenv("FAKECUDA_DEVICES", "90", 1);
  setenv("FATPACK_CACHE_DISABLE", "1", 1);  // the runtime's own default cache stays out of the way
  // Entries per module are counted here: whole-module loads (pieces: tests/runtime/pieces_test.cpp).
  setenv("FATPACK_JIT_PIECES", "off", 1);
  unsetenv("FATPACK_DRIVER_VERSION_FILE");
  return true;
}();

std::string fresh(const std::string& name) {
  std::string d = temp_dir() + "/" + name;
  REQUIRE(std::system(("rm -rf '" + d + "' && mkdir -p '" + d + "' && chmod 700 '" + d + "'").c_str()) == 0);
  return d;
}

jit_key key_for(std::uint64_t ptx_hash, std::uint32_t arch = 90, int driver = 13000) {
  jit_key k;
  k.ptx_xxh3 = ptx_hash;
  k.ptx_size = 1000 + ptx_hash % 100;
  k.ptx_target = fatpack::core::target::parse("compute_80").value();
  k.ptx_isa = fatpack::core::ptx_isa{9, 0};
  k.target_arch = arch;
  k.options = "-O3";
  k.driver_version = driver;
  return k;
}

const std::vector<std::uint8_t>& cubin90() {
  static const auto c = read_file(artifact("vadd.sm_90.cubin"));
  return c;
}

// `n` entries of cubin90() written to `d`, under key_for(first) .. key_for(first + n - 1); their keys.
std::vector<full_key> write_entries(cache_dir& d, std::uint64_t first, int n) {
  std::vector<full_key> keys;
  std::string why;
  for (int i = 0; i < n; ++i) {
    keys.push_back(make_full_key(key_for(first + static_cast<std::uint64_t>(i))));
    REQUIRE(d.write(keys.back(), fatpack::core::byte_span(cubin90()), why) == 0);
  }
  return keys;
}

// Records warnings.
struct log_capture {
  std::mutex mu;
  std::vector<std::string> lines;
  log_capture() {
    fatpack::set_log_level(fatpack::log_level::warn);
    fatpack::set_log_callback([this](fatpack::log_level, std::string_view l) {
      std::lock_guard<std::mutex> g(mu);
      lines.emplace_back(l);
    });
  }
  ~log_capture() {
    fatpack::set_log_callback(nullptr);
    fatpack::set_log_level(fatpack::log_level::off);
  }
  std::size_t count(const std::string& s) {
    std::lock_guard<std::mutex> g(mu);
    std::size_t n = 0;
    for (const auto& l : lines) n += l.find(s) != std::string::npos;
    return n;
  }
};

// The seam with injected faults: `fail[op]` = errno for every call of that operation.
class faulty_fs final : public fs {
 public:
  std::map<std::string, int> fail;
  bool network = false, privileged = false;
  std::uint32_t fake_euid = 0xFFFFFFFF;  // otherwise the real one
  fs& real = posix_fs();

  faulty_fs() { set_fs_for_testing(this); }
  ~faulty_fs() override { set_fs_for_testing(nullptr); }
  int f(const char* op) {
    auto it = fail.find(op);
    return it == fail.end() ? 0 : it->second;
  }
  int open(const std::string& p, open_mode m, int& fd) override {
    if (int e = f(m == open_mode::read ? "open_read" : m == open_mode::create_new ? "open_new" : "open_rw")) return e;
    return real.open(p, m, fd);
  }
  void close(int fd) override { real.close(fd); }
  bool short_read = false;  // every pread reads half and reports the end of the file
  // Runs after each pread (descriptor, offset): a file changed between two steps of a reader.
  std::function<void(int, std::uint64_t)> after_pread;
  int pread(int fd, void* b, std::size_t n, std::uint64_t o, std::size_t& got) override {
    if (int e = f("pread")) return e;
    const int e = real.pread(fd, b, short_read ? n / 2 : n, o, got);
    if (!e && after_pread) after_pread(fd, o);
    return e;
  }
  int pwrite(int fd, const void* b, std::size_t n, std::uint64_t o) override {
    if (int e = f("pwrite")) return e;
    return real.pwrite(fd, b, n, o);
  }
  int allocate(int fd, std::uint64_t n) override {
    if (int e = f("allocate")) return e;
    return real.allocate(fd, n);
  }
  int fstat(int fd, file_stat& st) override { return real.fstat(fd, st); }
  int map_reads = 0;  // map_read calls
  int map_read(int fd, std::uint64_t n, const void*& a) override {
    ++map_reads;
    if (int e = f("map_read")) return e;
    return real.map_read(fd, n, a);
  }
  // Runs after each successful stat (path, result): e.g. a directory root owns, as /tmp is.
  std::function<void(const std::string&, file_stat&)> after_stat;
  int stat(const std::string& p, file_stat& st) override {
    const int e = real.stat(p, st);
    if (!e && after_stat) after_stat(p, st);
    return e;
  }
  int mkdir(const std::string& p, std::uint32_t m) override {
    if (int e = f("mkdir")) return e;
    return real.mkdir(p, m);
  }
  int chmod(const std::string& p, std::uint32_t m) override { return real.chmod(p, m); }
  int rename(const std::string& a, const std::string& b) override {
    if (int e = f("rename")) return e;
    return real.rename(a, b);
  }
  int unlink(const std::string& p) override { return real.unlink(p); }
  int rmdir(const std::string& p) override { return real.rmdir(p); }
  int list_dir(const std::string& p, std::vector<std::string>& n) override { return real.list_dir(p, n); }
  int try_flock(int fd) override { return real.try_flock(fd); }
  int try_byte_lock(int fd, std::uint64_t o) override {
    if (int e = f("byte_lock")) return e;
    return real.try_byte_lock(fd, o);
  }
  int byte_unlock(int fd, std::uint64_t o) override { return real.byte_unlock(fd, o); }
  bool network_fs(const std::string& p) override { return network || real.network_fs(p); }
  std::uint32_t euid() override { return fake_euid != 0xFFFFFFFF ? fake_euid : real.euid(); }
  std::string fake_home;  // non-empty: passwd_home() answers this
  std::string passwd_home() override { return fake_home.empty() ? real.passwd_home() : fake_home; }
  bool privileged_exec() override { return privileged; }
  std::int64_t clock_offset_s = 0;  // a wrong or jumped system clock
  std::int64_t now_unix_s() override { return real.now_unix_s() + clock_offset_s; }
  std::int64_t now_unix_ns() override { return real.now_unix_ns() + clock_offset_s * 1000000000; }
  int pid() override { return real.pid(); }
};

bool exists(const std::string& path) {
  file_stat st;
  return posix_fs().stat(path, st) == 0;
}

config cfg_for(const std::string& dir) {
  config c;
  c.path = dir;
  c.max_bytes = 1ull << 30;
  c.lock_wait_ms = 2000;
  return c;
}

}  // namespace

TEST_CASE("keys: every code-key field changes the key; the driver tier is separate") {
  const jit_key a = key_for(0x1234);
  const full_key ka = make_full_key(a);
  auto differs = [&](auto mutate) {
    jit_key b = a;
    mutate(b);
    return make_code_key(b).hash != ka.code.hash;
  };
  CHECK(differs([](jit_key& k) { k.ptx_xxh3 ^= 1; }));
  CHECK(differs([](jit_key& k) { k.ptx_size += 1; }));
  CHECK(differs([](jit_key& k) { k.target_arch = 86; }));
  CHECK(differs([](jit_key& k) { k.target_variant = fatpack::core::arch_variant::arch_specific; }));
  CHECK(differs([](jit_key& k) { k.options = "-O2"; }));
  CHECK(differs([](jit_key& k) { k.backend = "nvjitlink-13.0"; }));
  CHECK(differs([](jit_key& k) { k.ptx_isa = fatpack::core::ptx_isa{8, 8}; }));
  CHECK(differs([](jit_key& k) { k.piece_of = "0000000000001234:100"; }));  // a piece: its entry too
  CHECK_FALSE(differs([](jit_key& k) { k.driver_version = 13010; }));  // second tier
  CHECK(make_full_key(key_for(0x1234, 90, 13010)).driver.hash != ka.driver.hash);
  CHECK(make_driver_id(13000, "580.159.04").hash != make_driver_id(13000, "580.95.05").hash);
  CHECK(make_driver_id(13000, "").text == "13000");
  CHECK(ka.code.text.rfind("v1|culink|", 0) == 0);
  CHECK(parse_driver_build("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue Oct 10 2026\nGCC version") ==
        "580.159.04");
  CHECK(parse_driver_build("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build") == "580.95.05");
  CHECK(parse_driver_build("garbage").empty());
  std::array<std::uint8_t, 16> c{};
  std::uint64_t d = 0;
  CHECK(parse_file_name(ka.file_name(), c, d));
  CHECK(c == ka.code.hash);
  CHECK(d == ka.driver.hash);
  CHECK_FALSE(parse_file_name("." + ka.file_name() + ".1.2.tmp", c, d));
  std::uint64_t sz = 0;
  CHECK(parse_size("256M", sz));
  CHECK(sz == 256ull << 20);
  CHECK(parse_size("2GiB", sz));
  CHECK(sz == 2ull << 30);
  CHECK(parse_size("3Ki", sz));
  CHECK(sz == 3ull << 10);
  CHECK(parse_size("5B", sz));
  CHECK(sz == 5);
  CHECK_FALSE(parse_size("lots", sz));
  sz = 7;
  CHECK_FALSE(parse_size("5i", sz));  // was 5 bytes: an 'i' without a unit
  CHECK_FALSE(parse_size("5iB", sz));
  CHECK_FALSE(parse_size("5KiiB", sz));
  CHECK(sz == 7);
}

TEST_CASE("a shared directory or '/' given as the cache root is refused before anything is made in it") {
  // FATPACK_CACHE_PATH=/tmp (mode 1777): refused as writable by others, and it was, but only after
  // v1/ had been made in it; '/' run as root passed every check and got /v1.
  const std::string shared = fresh("shared-root");
  REQUIRE(::chmod(shared.c_str(), 01777) == 0);
  const dir_verdict v = prepare_user_dir(shared, false);
  CHECK(v.access == dir_access::refused);
  CHECK(v.warning.find("writable by group or others") != std::string::npos);
  CHECK_FALSE(exists(shared + "/v1"));
  for (const char* root : {"/", "//", "/.", "/./", "/tmp/.."}) {
    CAPTURE(root);
    const bool had_v1 = exists("/v1");
    const dir_verdict r = prepare_user_dir(root, false);
    CHECK(r.access == dir_access::refused);
    CHECK(r.warning.find("a directory of its own") != std::string::npos);
    CHECK(exists("/v1") == had_v1);
  }
}

TEST_CASE("a refused cache directory gets advice that fits it: a shared one (/tmp) is not to be chmod-ed") {
  // FATPACK_CACHE_PATH=/tmp ended in "chmod 700 it": wrong for a shared sticky directory (and for one
  // this user does not own, which it cannot chmod). Those get "use a directory of its own".
  const auto no_chmod_own_dir = [](const dir_verdict& v, const std::string& dir) {
    CAPTURE(v.warning);
    CHECK(v.access == dir_access::refused);
    CHECK(v.warning.find("chmod 700") == std::string::npos);
    CHECK(v.warning.find("a directory of its own") != std::string::npos);
    CHECK(v.warning.find("FATPACK_CACHE_PATH=" + dir + "/fatpack-cache") != std::string::npos);
  };
  const std::string shared = fresh("advice-shared");
  REQUIRE(::chmod(shared.c_str(), 01777) == 0);
  no_chmod_own_dir(prepare_user_dir(shared, false), shared);
  {
    // The same directory owned by root while this user is someone else: /tmp as most users see it.
    faulty_fs ffs;
    ffs.fake_euid = 4242;
    ffs.after_stat = [](const std::string&, file_stat& st) { st.uid = 0; };
    const dir_verdict v = prepare_user_dir(shared, false);
    CHECK(v.warning.find("owned by uid 0") != std::string::npos);
    no_chmod_own_dir(v, shared);
  }
  // The real /tmp, where it is the usual shared sticky directory (nothing is made in it).
  file_stat tmp;
  if (posix_fs().stat("/tmp", tmp) == 0 && tmp.directory && (tmp.mode & 01002) == 01002) {
    const bool had_v1 = exists("/tmp/v1");
    no_chmod_own_dir(prepare_user_dir("/tmp", false), "/tmp");
    CHECK(exists("/tmp/v1") == had_v1);
  }
  {
    // Another user's private directory: not ours to chmod either.
    const std::string theirs = fresh("advice-theirs");
    faulty_fs ffs;
    ffs.fake_euid = 4242;
    const dir_verdict v = prepare_user_dir(theirs, false);
    CAPTURE(v.warning);
    CHECK(v.access == dir_access::refused);
    CHECK(v.warning.find("owned by uid") != std::string::npos);
    CHECK(v.warning.find("chmod 700") == std::string::npos);
    CHECK(v.warning.find("a directory of its own") != std::string::npos);
  }
  {
    // This user's own directory, open to the group: chmod 700 is the right advice there.
    const std::string mine = fresh("advice-mine");
    REQUIRE(::chmod(mine.c_str(), 0770) == 0);
    const dir_verdict v = prepare_user_dir(mine, false);
    CAPTURE(v.warning);
    CHECK(v.access == dir_access::refused);
    CHECK(v.warning.find("; chmod 700 it") != std::string::npos);
  }
  {
    // A prebuilt layer root owns (accepted) but the group may write: only its owner can fix it, and
    // chmod 700 would lock this user out of it.
    const std::string layer = fresh("advice-layer");
    REQUIRE(::chmod(layer.c_str(), 0775) == 0);
    faulty_fs ffs;
    ffs.fake_euid = 4242;
    ffs.after_stat = [](const std::string&, file_stat& st) { st.uid = 0; };
    const dir_verdict v = check_prebuilt_dir(layer);
    CAPTURE(v.warning);
    CHECK(v.access == dir_access::refused);
    CHECK(v.warning.find("writable by group or others") != std::string::npos);
    CHECK(v.warning.find("chmod 700") == std::string::npos);
    CHECK(v.warning.find("chmod go-w") != std::string::npos);
  }
  {
    // A layer of this user's own, open to the group: a prebuilt layer is read by others, so chmod 700
    // (the advice it got) would lock them out; go-w is the fix.
    const std::string layer = fresh("advice-own-layer");
    REQUIRE(::chmod(layer.c_str(), 0775) == 0);
    const dir_verdict v = check_prebuilt_dir(layer);
    CAPTURE(v.warning);
    CHECK(v.access == dir_access::refused);
    CHECK(v.warning.find("chmod 700") == std::string::npos);
    CHECK(v.warning.find("; chmod go-w it") != std::string::npos);
  }
}

TEST_CASE("a cache root that is a symbolic link is named as one, not as 'not a directory'") {
  // It read "<link> is not a directory (symbolic links are not followed)": users saw a link to a
  // directory called not a directory.
  const std::string dir = fresh("root-symlink");
  const std::string real = dir + "/real", link = dir + "/link";
  REQUIRE(::mkdir(real.c_str(), 0700) == 0);
  REQUIRE(::symlink(real.c_str(), link.c_str()) == 0);
  file_stat ls, rs;
  REQUIRE(posix_fs().stat(link, ls) == 0);
  REQUIRE(posix_fs().stat(real, rs) == 0);
  CHECK(ls.symlink);  // lstat: the link itself
  CHECK_FALSE(ls.directory);
  CHECK_FALSE(rs.symlink);
  // Also given with trailing slashes, which make lstat follow the link (it was accepted so).
  for (const dir_verdict& v : {prepare_user_dir(link, false), check_prebuilt_dir(link), prepare_user_dir(link + "/", false),
                               check_prebuilt_dir(link + "//")}) {
    CAPTURE(v.warning);
    CHECK(v.access == dir_access::refused);
    CHECK(v.warning.find(link + " is a symbolic link: not followed") != std::string::npos);
    CHECK(v.warning.find("give the directory it points to") != std::string::npos);
    CHECK(v.warning.find("not a directory") == std::string::npos);
  }
  CHECK_FALSE(exists(real + "/v1"));
  // A file is still "not a directory".
  const std::string file = dir + "/file";
  REQUIRE(std::system(("touch '" + file + "'").c_str()) == 0);
  const dir_verdict f = prepare_user_dir(file, false);
  CHECK(f.access == dir_access::refused);
  CHECK(f.warning.find(file + " is not a directory") != std::string::npos);
}

TEST_CASE("sizes past 2^64 - 1 bytes are refused, never wrapped (17179869184G was 0: unbounded, or prune all)") {
  std::uint64_t sz = 7;
  CHECK_FALSE(parse_size("17179869184G", sz));  // exactly 2^64
  CHECK_FALSE(parse_size("16777216T", sz));
  CHECK_FALSE(parse_size("18446744073709551616", sz));  // 2^64: strtoull saturates (ERANGE)
  CHECK_FALSE(parse_size("99999999999999999999999K", sz));
  CHECK(sz == 7);  // untouched on failure
  CHECK(parse_size("16777215T", sz));
  CHECK(sz == 16777215ull << 40);
  CHECK(parse_size("18446744073709551615", sz));
  CHECK(sz == ~0ull);
  // The environment: a warning and the default, not 0 (= no bound).
  setenv("FATPACK_CACHE_MAXSIZE", "17179869184G", 1);
  const config c = config_from_env();
  unsetenv("FATPACK_CACHE_MAXSIZE");
  CHECK(c.max_bytes == default_max_bytes);
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].find("not a size") != std::string::npos);
}

TEST_CASE("FATPACK_CACHE_CODEC: none (the default) or lz4; anything else is one warning and the default") {
  unsetenv("FATPACK_CACHE_CODEC");
  CHECK(config_from_env().codec == entry_codec::stored);
  setenv("FATPACK_CACHE_CODEC", "lz4", 1);
  CHECK(config_from_env().codec == entry_codec::lz4);
  CHECK(config_from_env().warnings.empty());
  setenv("FATPACK_CACHE_CODEC", "none", 1);
  CHECK(config_from_env().codec == entry_codec::stored);
  for (const char* bad : {"zstd", "LZ4", "1", " none"}) {
    CAPTURE(bad);
    setenv("FATPACK_CACHE_CODEC", bad, 1);
    const config c = config_from_env();
    CHECK(c.codec == entry_codec::stored);
    REQUIRE(c.warnings.size() == 1);
    CHECK(c.warnings[0].find("FATPACK_CACHE_CODEC") != std::string::npos);
  }
  unsetenv("FATPACK_CACHE_CODEC");
}

TEST_CASE("FATPACK_CACHE_LOCK_WAIT_MS: digits only; anything else is one warning and the default") {
  // Before: atoi, so "2min" waited 2 ms, "lots" and "-5" turned single flight off, without a word.
  const int def = config{}.lock_wait_ms;
  for (const char* bad : {"-5", "2min", "120s", "lots", " 7", "1e5", "99999999999", "2147483648"}) {
    CAPTURE(bad);
    setenv("FATPACK_CACHE_LOCK_WAIT_MS", bad, 1);
    const config c = config_from_env();
    CHECK(c.lock_wait_ms == def);
    REQUIRE(c.warnings.size() == 1);
    CHECK(c.warnings[0].find("FATPACK_CACHE_LOCK_WAIT_MS") != std::string::npos);
  }
  for (int good : {0, 20, 60000, 2147483647}) {
    setenv("FATPACK_CACHE_LOCK_WAIT_MS", std::to_string(good).c_str(), 1);
    const config c = config_from_env();
    CHECK(c.lock_wait_ms == good);
    CHECK(c.warnings.empty());
  }
  unsetenv("FATPACK_CACHE_LOCK_WAIT_MS");
}

TEST_CASE("a FATPACK_CACHE_* value quoted in a warning is cut to 64 bytes and made printable") {
  // Before: FATPACK_CACHE_MAXSIZE and FATPACK_CACHE_HOLDER_STALL_S were quoted whole and raw (a 100 KB
  // value was a 100 KB warning line; escape sequences went to the terminal as they were).
  const std::string hostile = "x\x1b[31mred\x7f\xff" + std::string(1000, 'y');
  for (const char* var : {"FATPACK_CACHE_MAXSIZE", "FATPACK_CACHE_CODEC", "FATPACK_CACHE_LOCK_WAIT_MS",
                          "FATPACK_CACHE_HOLDER_STALL_S"}) {
    CAPTURE(var);
    setenv(var, hostile.c_str(), 1);
    const config c = config_from_env();
    REQUIRE(c.warnings.size() == 1);
    const std::string& w = c.warnings[0];
    CHECK(w.find(std::string(var) + "=x?[31mred??yyy") == 0);
    CHECK(w.find("y...") != std::string::npos);
    CHECK(w.size() < 300);
    for (char ch : w) CHECK((ch >= 0x20 && ch <= 0x7e));
    unsetenv(var);
  }
}

TEST_CASE("FATPACK_CACHE_HOLDER_STALL_S: 2-3600 s; garbage or out of range is one warning and the default") {
  for (const char* bad : {"0", "1", "3601", "-5", "10s", "lots", " 7", "99999999999"}) {
    CAPTURE(bad);
    setenv("FATPACK_CACHE_HOLDER_STALL_S", bad, 1);
    const config c = config_from_env();
    CHECK(c.holder_stall_s == default_holder_stall_s);
    REQUIRE(c.warnings.size() == 1);
    CHECK(c.warnings[0].find("FATPACK_CACHE_HOLDER_STALL_S") != std::string::npos);
  }
  for (int good : {2, 30, 3600}) {
    setenv("FATPACK_CACHE_HOLDER_STALL_S", std::to_string(good).c_str(), 1);
    const config c = config_from_env();
    CHECK(c.holder_stall_s == good);
    CHECK(c.warnings.empty());
  }
  unsetenv("FATPACK_CACHE_HOLDER_STALL_S");
  CHECK(config_from_env().holder_stall_s == default_holder_stall_s);
}

TEST_CASE("entries: round trip; every header bit flip, truncation and payload damage is refused") {
  entry_codec codec = entry_codec::lz4;
  SUBCASE("LZ4") { codec = entry_codec::lz4; }
  SUBCASE("stored") { codec = entry_codec::stored; }
  const full_key k = make_full_key(key_for(0x77));
  std::string why;
  auto enc = encode_entry(k, fatpack::core::byte_span(cubin90()), 1, why, codec);
  REQUIRE_MESSAGE(enc.has_value(), why);
  MESSAGE("entry of a " << cubin90().size() << "-byte cubin: " << enc->size() << " bytes ("
                        << double(enc->size()) / double(cubin90().size()) << " per cubin byte)");
  if (codec == entry_codec::lz4) CHECK(enc->size() < cubin90().size());
  if (codec == entry_codec::stored) CHECK(enc->size() > cubin90().size());
  const expected_key want{&k.code, &k.driver, 90};
  entry_header h;
  std::string drv, problem;
  auto dec = decode_entry(fatpack::core::byte_span(*enc), want, h, drv, problem);
  REQUIRE_MESSAGE(dec.has_value(), problem);
  CHECK(*dec == cubin90());
  CHECK(sm_arch(h.sm) == 90);

  std::size_t refused = 0, total = 0;
  auto never_wrong = [&](const std::vector<std::uint8_t>& bytes) {
    ++total;
    entry_header hh;
    std::string d2, p2;
    auto r = decode_entry(fatpack::core::byte_span(bytes), want, hh, d2, p2);
    if (!r) {
      ++refused;
      return;
    }
    CHECK(*r == cubin90());  // anything accepted must be the exact bytes
  };
  // Every bit of the header (with a stored entry's zero padding, format 1.2: its cubin starts at a
  // multiple of 64) and of the key texts.
  if (codec == entry_codec::stored) CHECK(h.payload_offset() % 64 == 0);
  if (codec == entry_codec::lz4) CHECK(h.header_size == entry_header_size);
  const std::size_t texts_end = h.payload_offset();
  for (std::size_t bit = 0; bit < texts_end * 8; ++bit) {
    auto b = *enc;
    b[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    never_wrong(b);
  }
  CHECK(refused == total);  // reserved header bytes are covered by the header checksum, the padding by its rule
  // Payload: 2000 random single-bit flips and 200 random multi-byte smears.
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    auto b = *enc;
    std::size_t bit = std::uniform_int_distribution<std::size_t>(texts_end * 8, b.size() * 8 - 1)(rng);
    b[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    never_wrong(b);
  }
  for (int i = 0; i < 200; ++i) {
    auto b = *enc;
    std::size_t at = std::uniform_int_distribution<std::size_t>(0, b.size() - 8)(rng);
    for (int j = 0; j < 8; ++j) b[at + j] = static_cast<std::uint8_t>(rng());
    never_wrong(b);
  }
  // Every truncation, trailing garbage, empty and zero-filled files.
  for (std::size_t n = 0; n < enc->size(); ++n) never_wrong(std::vector<std::uint8_t>(enc->begin(), enc->begin() + n));
  auto longer = *enc;
  longer.push_back(0);
  never_wrong(longer);
  never_wrong(std::vector<std::uint8_t>(enc->size(), 0));
  CHECK(refused == total);
  // A valid entry asked for under another key, or another driver, or another SM.
  const full_key other = make_full_key(key_for(0x78));
  const expected_key want_other{&other.code, &other.driver, 90};
  CHECK_FALSE(decode_entry(fatpack::core::byte_span(*enc), want_other, h, drv, problem).has_value());
  CHECK(problem.find("another key") != std::string::npos);
  {
    // A planted key text of 64 KiB of escapes is quoted short and printable (it was quoted whole).
    full_key long_key = k;
    long_key.code.text = std::string(60000, '\x1b');
    long_key.code.hash = make_full_key(key_for(0x7A)).code.hash;
    auto planted = encode_entry(long_key, fatpack::core::byte_span(cubin90()), 1, why, codec);
    REQUIRE(planted.has_value());
    CHECK_FALSE(decode_entry(fatpack::core::byte_span(*planted), want, h, drv, problem).has_value());
    CHECK(problem.find("another key") != std::string::npos);
    CHECK(problem.size() < 300);
    CHECK(problem.find('\x1b') == std::string::npos);
  }
  {
    // A planted driver text (up to 4 KiB: a forged line, bytes above 0x7f) is quoted short too: it
    // went into the warning whole, so a crafted entry could print a line of its own.
    full_key planted_driver = k;
    planted_driver.driver.text = "0\nfatpack: cache hit (forged)\xff\xfe" + std::string(3000, 'x');
    auto planted = encode_entry(planted_driver, fatpack::core::byte_span(cubin90()), 1, why, codec);
    REQUIRE(planted.has_value());
    CHECK_FALSE(decode_entry(fatpack::core::byte_span(*planted), want, h, drv, problem).has_value());
    CHECK(problem.find("entry is for driver") != std::string::npos);
    CHECK(problem.size() < 400);
    CHECK(problem.find('\n') == std::string::npos);
    CHECK(problem.find('\xff') == std::string::npos);
  }
  const full_key newer = make_full_key(key_for(0x77, 90, 13010));
  const expected_key want_newer{&newer.code, &newer.driver, 90};
  CHECK_FALSE(decode_entry(fatpack::core::byte_span(*enc), want_newer, h, drv, problem).has_value());
  const expected_key any_driver{&newer.code, nullptr, 90};
  CHECK(decode_entry(fatpack::core::byte_span(*enc), any_driver, h, drv, problem).has_value());  // other-driver hit
  const expected_key wrong_sm{&k.code, &k.driver, 86};
  CHECK_FALSE(decode_entry(fatpack::core::byte_span(*enc), wrong_sm, h, drv, problem).has_value());
  // Not a cubin: not cached.
  std::vector<std::uint8_t> junk(1000, 0x41);
  CHECK_FALSE(encode_entry(k, fatpack::core::byte_span(junk), 1, why, codec).has_value());
}

TEST_CASE("an entry holding another key names an NVRTC key as one, not with the JIT key's field names") {
  // fatpack::compile's keys (compile_api.cpp cache_key_of) fill a jit_key: the code text reads
  // "v1|nvrtc|ptx=<xxh3>:<size>|src=sm_90@0.0|cc=90|opt=source=<hash>", where ptx= is the source key
  // text's hash and size and src= a placeholder. The message quoted that text: an NVRTC source key
  // shown as if it were PTX.
  const std::string hi = "0123456789abcdef", lo = "fedcba9876543210";
  const auto nvrtc_key = [&](const char* backend, int driver) {
    jit_key k;
    k.backend = backend;
    k.ptx_xxh3 = std::stoull(lo, nullptr, 16);
    k.ptx_size = 532;
    k.ptx_target = fatpack::core::target{fatpack::core::entry_kind::sass, 90, fatpack::core::arch_variant::plain};
    k.target_arch = 90;
    k.options = "source=" + hi + lo;
    k.driver_version = driver;
    return k;
  };
  const full_key want = make_full_key(key_for(0x5a));
  const expected_key asked{&want.code, nullptr, 90};
  const auto problem_of = [&](const full_key& stored) {
    std::string why, drv, problem;
    auto enc = encode_entry(stored, fatpack::core::byte_span(cubin90()), 1, why);
    REQUIRE_MESSAGE(enc.has_value(), why);
    entry_header h;
    CHECK_FALSE(decode_entry(fatpack::core::byte_span(*enc), asked, h, drv, problem).has_value());
    return problem;
  };
  const std::string source = problem_of(make_full_key(nvrtc_key("nvrtc", 0)));
  CHECK(source == "entry holds another key (NVRTC source key " + hi + lo + ", sm_90)");
  const std::string jit = problem_of(make_full_key(nvrtc_key("nvrtc-jit", 13000)));
  CHECK(jit == "entry holds another key (NVRTC PTX-path JIT key " + hi + lo + ", sm_90)");
  // A PTX JIT key is quoted as it is: its field names are its own.
  const std::string ptx = problem_of(make_full_key(key_for(0x5b)));
  CHECK(ptx.find("entry holds another key (v1|culink|ptx=") == 0);
  // Anything else that starts like an NVRTC key is quoted, not described.
  full_key odd = make_full_key(nvrtc_key("nvrtc", 0));
  odd.code = code_key_of_text(odd.code.text + "|extra");
  CHECK(problem_of(odd).find("entry holds another key (v1|nvrtc|ptx=") == 0);
  // `fatpack cache verify`: an NVRTC entry under another entry's name.
  const std::string root = fresh("another-key-nvrtc");
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  const full_key src = make_full_key(nvrtc_key("nvrtc", 0));
  std::string why;
  REQUIRE(d->write(src, fatpack::core::byte_span(cubin90()), why) == 0);
  REQUIRE(std::system(("mkdir -p '" + d->fanout_dir(want.code.hash) + "' && cp '" + d->entry_path(src) + "' '" +
                       d->entry_path(want) + "'").c_str()) == 0);
  auto a = admin::open(root, false);
  REQUIRE(a.has_value());
  bool seen = false;
  for (const auto& p : (*a)->verify(false)) {
    if (p.file != d->entry_path(want)) continue;
    seen = true;
    CHECK(p.problem == "entry holds another key than its file name says (NVRTC source key " + hi + lo + ", sm_90)");
  }
  CHECK(seen);
  // `fatpack cache list` names the NVRTC entry as the NVRTC source key it holds, never as PTX, and
  // the copy under another name as verify does (before: listed as an entry like any other); a PTX
  // JIT entry keeps its text.
  const full_key ptx_key = make_full_key(key_for(0x5c));
  REQUIRE(d->write(ptx_key, fatpack::core::byte_span(cubin90()), why) == 0);
  // A text this version does not write (the odd NVRTC-like one above) is "unknown", not "ptx-jit"
  // (before: every text that was not an NVRTC key was called a PTX JIT).
  REQUIRE(d->write(odd, fatpack::core::byte_span(cubin90()), why) == 0);
  int nvrtc_entries = 0, ptx_entries = 0, unknown_entries = 0;
  std::vector<entry_problem> unlisted;
  for (const auto& e : (*a)->list(&unlisted)) {
    if (e.kind == "nvrtc-source") {
      ++nvrtc_entries;
      CHECK(e.code_name == "NVRTC source key " + hi + lo + ", sm_90");
      CHECK(e.code_text == src.code.text);
    } else if (e.kind == "unknown") {
      ++unknown_entries;
      CHECK(e.code_name == odd.code.text);
    } else {
      ++ptx_entries;
      CHECK(e.kind == "ptx-jit");
      CHECK(e.code_name == ptx_key.code.text);
    }
  }
  CHECK(nvrtc_entries == 1);
  CHECK(ptx_entries == 1);
  CHECK(unknown_entries == 1);
  REQUIRE(unlisted.size() == 1);
  CHECK(unlisted[0].file == d->entry_path(want));
  CHECK(unlisted[0].problem == "entry holds another key than its file name says (NVRTC source key " + hi + lo + ", sm_90)");
}

TEST_CASE("entries: a stored entry whose header and texts were re-checksummed to lie is still refused") {
  // The header's own checksum is recomputed after each change, as a forger would: what then refuses
  // the entry is the stored-entry rules (payload = cubin, one checksum for both, no block size).
  const full_key k = make_full_key(key_for(0x79));
  std::string why;
  auto enc = encode_entry(k, fatpack::core::byte_span(cubin90()), 1, why, entry_codec::stored);
  REQUIRE(enc.has_value());
  const expected_key want{&k.code, &k.driver, 90};
  // The entry with `bytes` bytes at `off` set to `value` and its header checksum recomputed: what
  // decode_entry says ("" when it accepts it).
  auto forged = [&](std::size_t off, std::uint64_t value, int bytes) {
    auto b = *enc;
    for (int i = 0; i < bytes; ++i) b[off + i] = static_cast<std::uint8_t>(value >> (8 * i));
    const std::uint64_t h = XXH3_64bits(b.data(), 120);
    for (int i = 0; i < 8; ++i) b[120 + i] = static_cast<std::uint8_t>(h >> (8 * i));
    entry_header hh;
    std::string d2, problem;
    auto r = decode_entry(fatpack::core::byte_span(b), want, hh, d2, problem);
    return r ? std::string() : "refused: " + problem;
  };
  CHECK(forged(0, 0, 0).empty());                                                       // unchanged: accepted
  CHECK(forged(96, 256u << 10, 4).find("block size") != std::string::npos);             // a block size
  CHECK(forged(72, 0x1234, 8).find("checksums differ") != std::string::npos);           // payload hash != cubin hash
  CHECK(forged(16, 7, 4).find("unknown flags") != std::string::npos);                   // codec 7
  CHECK(forged(64, cubin90().size() - 1, 8).find("payload size") != std::string::npos);  // payload != cubin size
}

TEST_CASE("store: stored entries larger than the front read come in two reads; LZ4 entries stay readable") {
  // A cubin padded past the front read (header + the longest key texts), so the cubin is read on
  // its own straight into the returned buffer.
  auto big = cubin90();
  big.resize(max_entry_front + 100 * 1024, 0);
  REQUIRE_MESSAGE(cubin_sm_word(fatpack::core::byte_span(big)).has_value(), "a padded cubin is still a cubin");
  const std::string root = fresh("stored");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false, entry_codec::stored);
  const full_key a = make_full_key(key_for(31)), b = make_full_key(key_for(32));
  std::string why;
  REQUIRE(d->write(a, fatpack::core::byte_span(big), why) == 0);
  struct stat st{};
  REQUIRE(::stat(d->entry_path(a).c_str(), &st) == 0);
  CHECK(std::uint64_t(st.st_size) > big.size());  // stored, not compressed
  auto hit = d->read_exact(a, 90);
  REQUIRE(hit.has_value());
  CHECK(*hit == big);
  hit.reset();  // (a mapping of the file: the edit below would show through it)
  // One byte of the cubin changed, past the front: refused by the cubin's checksum, and removed.
  {
    std::FILE* f = std::fopen(d->entry_path(a).c_str(), "r+b");
    REQUIRE(f);
    std::fseek(f, -10, SEEK_END);
    std::fputc(0x5A, f);
    std::fclose(f);
  }
  const auto rejected0 = stats().rejected.load();
  CHECK_FALSE(d->read_exact(a, 90).has_value());
  CHECK(stats().rejected.load() == rejected0 + 1);
  CHECK_FALSE(exists(d->entry_path(a)));
  // Truncated inside the cubin: refused (the header's sizes), never a short buffer.
  REQUIRE(d->write(a, fatpack::core::byte_span(big), why) == 0);
  REQUIRE(::truncate(d->entry_path(a).c_str(), st.st_size - 1) == 0);
  CHECK_FALSE(d->read_exact(a, 90).has_value());
  // An LZ4 entry (a cache written by FATPACK_CACHE_CODEC=lz4, or before format 1.1) is read by a
  // cache that writes stored entries, and the other way round.
  auto lz = cache_dir::open(root, true, 1ull << 30, "user", false, entry_codec::lz4);
  REQUIRE(lz->write(b, fatpack::core::byte_span(big), why) == 0);
  REQUIRE(::stat(d->entry_path(b).c_str(), &st) == 0);
  CHECK(std::uint64_t(st.st_size) < big.size() / 2);
  auto from_lz4 = d->read_exact(b, 90);
  REQUIRE(from_lz4.has_value());
  CHECK(*from_lz4 == big);
  REQUIRE(d->write(a, fatpack::core::byte_span(big), why) == 0);
  auto from_stored = lz->read_exact(a, 90);
  REQUIRE(from_stored.has_value());
  CHECK(*from_stored == big);
}

TEST_CASE("store: key texts past the first read's page (a long options text) are read in a second read and served") {
  // read_entry reads one page first and the rest of the front only where the header says the key
  // texts end past it: texts that end before, at, and after that page, and the longest allowed.
  auto big = cubin90();
  big.resize(300 * 1024, 0);  // large enough to be mapped
  const std::string root = fresh("long-texts");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false, entry_codec::stored);
  auto lz = cache_dir::open(root, true, 1ull << 30, "user", false, entry_codec::lz4);
  std::string why;
  std::uint64_t n = 0;
  for (std::size_t options : {std::size_t(100), std::size_t(3800), std::size_t(3968), std::size_t(4200),
                              std::size_t(20000), max_code_text - 400}) {
    jit_key j = key_for(9000 + n++);
    j.options = std::string(options, 'o');
    const full_key k = make_full_key(j);
    REQUIRE(k.code.text.size() <= max_code_text);
    for (auto* dir : {d.get(), lz.get()}) {
      CAPTURE(options);
      REQUIRE(dir->write(k, fatpack::core::byte_span(big), why) == 0);
      auto hit = d->read_exact(k, 90);
      REQUIRE(hit.has_value());
      CHECK(*hit == big);
      hit.reset();
      // The same key with one byte of its text changed is not served from this entry.
      jit_key other = j;
      other.options.back() = 'p';
      CHECK_FALSE(d->read_exact(make_full_key(other), 90).has_value());
    }
  }
}

namespace {
// Lines of /proc/self/maps naming `path` (a mapping of it; " (deleted)" once it is unlinked).
int mappings_of(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find(path) != std::string::npos;
  return n;
}
}  // namespace

TEST_CASE("store: a large stored cubin is mapped, not read, and the mapping outlives the file; else it is read") {
  auto big = cubin90();
  big.resize(max_entry_front + 100 * 1024, 0);
  const std::string root = fresh("mapped");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false, entry_codec::stored);
  const full_key a = make_full_key(key_for(41)), small = make_full_key(key_for(42));
  std::string why;
  REQUIRE(d->write(a, fatpack::core::byte_span(big), why) == 0);
  const std::string path = d->entry_path(a);
  const auto io0 = stats().io_errors.load();
  {
    auto hit = d->read_exact(a, 90);
    REQUIRE(hit.has_value());
    CHECK(hit->mapped());
    CHECK(reinterpret_cast<std::uintptr_t>(hit->data()) % 64 == 0);  // format 1.2: the cubin starts aligned
    CHECK(*hit == big);
    CHECK(mappings_of(path) == 1);
    // The writable room around the cubin (fs.hpp map_read): the entry's own pages before it plus
    // map_room, and the rest of its last page after it; to one taker among the copies. Writing there
    // changes this process's pages, never the file.
    {
      const std::vector<std::uint8_t> file_before = read_file(path);
      const sass_bytes copy = *hit;
      const auto room = copy.take_room();
      const std::size_t offset = file_before.size() - big.size();  // the cubin ends the file
      CHECK(room.first == map_room + offset);
      const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
      CHECK(room.second == (page - file_before.size() % page) % page);
      CHECK(hit->take_room() == std::pair<std::size_t, std::size_t>(0, 0));  // taken through the copy
      CHECK(hit->checked_xxh3() == XXH3_64bits(big.data(), big.size()));  // checked as it was read
      auto* cubin = const_cast<std::uint8_t*>(hit->data());
      std::memset(cubin - room.first, 0xA5, room.first);
      std::memset(cubin + big.size(), 0x5A, room.second);
      CHECK(*hit == big);
      CHECK(read_file(path) == file_before);
    }
    // Evicted (unlinked) and the layer gone while the SASS is in use: the bytes stay.
    REQUIRE(::unlink(path.c_str()) == 0);
    d.reset();
    CHECK(*hit == big);
  }
  CHECK(mappings_of(path) == 0);  // released with the last reference
  d = cache_dir::open(root, true, 1ull << 30, "user", false, entry_codec::stored);
  REQUIRE(d->write(a, fatpack::core::byte_span(big), why) == 0);
  // An entry small enough for the front read is copied out of it, not mapped.
  REQUIRE(d->write(small, fatpack::core::byte_span(cubin90()), why) == 0);
  auto s = d->read_exact(small, 90);
  REQUIRE(s.has_value());
  CHECK_FALSE(s->mapped());
  CHECK(*s == cubin90());
  SUBCASE("a file system that cannot map it: read instead, silently") {
    faulty_fs ffs;
    ffs.fail["map_read"] = ENODEV;
    auto hit = d->read_exact(a, 90);
    REQUIRE(hit.has_value());
    CHECK_FALSE(hit->mapped());
    CHECK(*hit == big);
    CHECK(stats().io_errors.load() == io0);
  }
  SUBCASE("a layer that must not map (a network file system): read") {
    auto nomap = cache_dir::open(root, false, 0, "user", false, entry_codec::stored, /*map_reads=*/false);
    auto hit = nomap->read_exact(a, 90);
    REQUIRE(hit.has_value());
    CHECK_FALSE(hit->mapped());
    CHECK(*hit == big);
    faulty_fs ffs;
    ffs.network = true;
    const dir_verdict v = prepare_user_dir(root, false);
    CHECK(v.network);
    CHECK(v.access == dir_access::read_only);
  }
  // The mapping relies on the entry being this cache's own file, replaced only by rename: one with
  // another hard link, or reached through a fan-out directory planted as a symlink, may be rewritten
  // in place by whatever else holds it, so it is read (checked as read) instead.
  SUBCASE("an entry with another hard link: read, not mapped") {
    const std::string other = root + "/elsewhere.fpc";
    REQUIRE(::link(path.c_str(), other.c_str()) == 0);
    auto hit = d->read_exact(a, 90);
    REQUIRE(hit.has_value());
    CHECK_FALSE(hit->mapped());
    CHECK(*hit == big);
    CHECK(mappings_of(path) == 0);
  }
  SUBCASE("an entry behind a fan-out directory planted as a symlink: not read; behind objects/: read, not mapped") {
    const std::string fan = path.substr(0, path.rfind('/'));
    const std::string objects = fan.substr(0, fan.rfind('/'));
    for (const std::string& dir : {fan, objects}) {
      INFO(dir);
      const std::string moved = root + "/moved";
      REQUIRE(::rename(dir.c_str(), moved.c_str()) == 0);
      REQUIRE(::symlink(moved.c_str(), dir.c_str()) == 0);
      auto hit = d->read_exact(a, 90);
      if (dir == fan) {
        // As every scan skips it (before: read, not mapped, though "nothing behind a symlink is read").
        CHECK_FALSE(hit.has_value());
        REQUIRE(::unlink(dir.c_str()) == 0);
        REQUIRE(::rename(moved.c_str(), dir.c_str()) == 0);
        continue;
      }
      // objects/ as a symlink: opening the cache refuses it (prepare_user_dir); a cache_dir opened
      // around that check still maps nothing behind it.
      REQUIRE(hit.has_value());
      CHECK_FALSE(hit->mapped());
      CHECK(*hit == big);
      REQUIRE(::unlink(dir.c_str()) == 0);  // back as it was for the next
      REQUIRE(::rename(moved.c_str(), dir.c_str()) == 0);
    }
  }
  SUBCASE("an entry of format 1.1 (cubin not aligned): read, and served") {
    std::vector<std::uint8_t> file = read_file(path);
    entry_header h;
    REQUIRE_FALSE(parse_header(fatpack::core::byte_span(file.data(), file.size()), file.size(), h).has_value());
    REQUIRE(h.header_size > entry_header_size);  // padded: the texts of key_for() are not a multiple of 64
    file.erase(file.begin() + entry_header_size, file.begin() + h.header_size);
    const std::uint32_t hs = entry_header_size;
    std::memcpy(file.data() + 12, &hs, 4);
    file[10] = 1;  // minor 1
    const std::uint64_t sum = XXH3_64bits(file.data(), 120);
    std::memcpy(file.data() + 120, &sum, 8);
    fatpack_test::write_file(path, file);
    auto hit = d->read_exact(a, 90);
    REQUIRE(hit.has_value());
    CHECK_FALSE(hit->mapped());
    CHECK(*hit == big);
  }
}

TEST_CASE("store: a large entry's header size forged (re-checksummed): refused, or served only with the right bytes") {
  // The two-step read (front, then the cubin mapped or read at the header's offsets) with every
  // header size a planted file may hold: never a crash, a read past the file, or wrong bytes.
  auto big = cubin90();
  big.resize(max_entry_front + 100 * 1024, 0);
  const std::string root = fresh("forged-hs");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false, entry_codec::stored);
  const full_key k = make_full_key(key_for(51));
  std::string why;
  REQUIRE(d->write(k, fatpack::core::byte_span(big), why) == 0);
  const std::string path = d->entry_path(k);
  const std::vector<std::uint8_t> good = read_file(path);
  entry_header h;
  REQUIRE_FALSE(parse_header(fatpack::core::byte_span(good.data(), good.size()), good.size(), h).has_value());
  // `file` with header size `hs`, minor `minor`, `insert` bytes of `fill` added after the header's
  // padding; served or not, and equal to the cubin when served.
  auto served = [&](std::uint32_t hs, std::uint16_t minor, std::size_t insert, std::uint8_t fill) {
    std::vector<std::uint8_t> f = good;
    f.insert(f.begin() + h.header_size, insert, fill);
    std::memcpy(f.data() + 12, &hs, 4);
    std::memcpy(f.data() + 10, &minor, 2);
    const std::uint64_t sum = XXH3_64bits(f.data(), 120);
    std::memcpy(f.data() + 120, &sum, 8);
    fatpack_test::write_file(path, f);
    ::chmod(path.c_str(), 0600);
    auto hit = d->read_exact(k, 90);
    if (hit) CHECK(*hit == big);
    return hit.has_value();
  };
  CHECK_FALSE(served(0, 2, 0, 0));
  CHECK_FALSE(served(entry_header_size - 1, 2, 0, 0));
  CHECK_FALSE(served(h.header_size - 1, 2, 0, 0));           // texts and cubin one byte early
  CHECK_FALSE(served(h.header_size + 1, 2, 0, 0));           // one byte late: sizes disagree
  CHECK_FALSE(served(0xFFFFFFFFu, 2, 0, 0));
  CHECK_FALSE(served(static_cast<std::uint32_t>(good.size()), 2, 0, 0));  // header to the file's end
  CHECK(served(h.header_size + 64, 2, 64, 0));               // more zero padding: still aligned, valid
  CHECK(served(h.header_size + 3, 2, 3, 0));                 // unaligned: read, not mapped, valid
  CHECK_FALSE(served(h.header_size + 64, 2, 64, 0xAA));      // padding not zero in a minor this reader knows
  CHECK(served(h.header_size + 64, 3, 64, 0xAA));            // a later minor's header bytes: skipped
  CHECK_FALSE(served(h.header_size + 80000, 2, 80000, 0));   // texts past the front read: refused, bounded
}

TEST_CASE("store: a valid entry under the wrong name, a truncated file, a symlink: never served, removed") {
  const std::string root = fresh("wrongname");
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  const full_key a = make_full_key(key_for(1)), b = make_full_key(key_for(2));
  std::string why;
  REQUIRE(d->write(a, fatpack::core::byte_span(cubin90()), why) == 0);
  REQUIRE(d->read_exact(a, 90).has_value());
  // Copy a's (valid, checksummed) file to b's name.
  REQUIRE(std::system(("mkdir -p '" + d->fanout_dir(b.code.hash) + "' && cp '" + d->entry_path(a) + "' '" + d->entry_path(b) + "'").c_str()) == 0);
  const auto rejected0 = stats().rejected.load();
  CHECK_FALSE(d->read_exact(b, 90).has_value());
  CHECK(stats().rejected.load() == rejected0 + 1);
  CHECK_FALSE(exists(d->entry_path(b)));  // quarantined
  CHECK_FALSE(d->read_other_driver(b, 90, why).has_value());
  // Truncated.
  REQUIRE(::truncate(d->entry_path(a).c_str(), 100) == 0);
  CHECK_FALSE(d->read_exact(a, 90).has_value());
  CHECK_FALSE(exists(d->entry_path(a)));
  // A symlink planted in its place (O_NOFOLLOW).
  REQUIRE(d->write(a, fatpack::core::byte_span(cubin90()), why) == 0);
  REQUIRE(std::system(("mv '" + d->entry_path(a) + "' '" + root + "/elsewhere' && ln -s '" + root + "/elsewhere' '" +
                       d->entry_path(a) + "'").c_str()) == 0);
  CHECK_FALSE(d->read_exact(a, 90).has_value());
  // A Unix socket planted in its place: invalid (open gives ENXIO), removed, not an I/O error that
  // keeps it and warns on every start.
  ::unlink(d->entry_path(a).c_str());  // the symlink, if the read above left it
  REQUIRE_FALSE(exists(d->entry_path(a)));
  {
    // Bound at a short path (sun_path holds 108 bytes), then renamed into place.
    char short_dir[] = "/tmp/fpsockXXXXXX";
    REQUIRE(::mkdtemp(short_dir) != nullptr);
    const std::string sp = std::string(short_dir) + "/s";
    const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(sock >= 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, sp.c_str(), sp.size() + 1);
    REQUIRE(::bind(sock, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    ::close(sock);
    REQUIRE(::rename(sp.c_str(), d->entry_path(a).c_str()) == 0);
    ::rmdir(short_dir);
  }
  const auto io0 = stats().io_errors.load(), rej0 = stats().rejected.load();
  CHECK_FALSE(d->read_exact(a, 90).has_value());
  CHECK(stats().io_errors.load() == io0);
  CHECK(stats().rejected.load() == rej0 + 1);
  CHECK_FALSE(exists(d->entry_path(a)));
  // And the cache keeps working: a fresh store serves again.
  REQUIRE(d->write(a, fatpack::core::byte_span(cubin90()), why) == 0);
  CHECK(d->read_exact(a, 90).has_value());
}

TEST_CASE("verify walks the whole cubin: an entry header whose a/f variant the cubin does not have") {
  // A hit reads the SM from the ELF header alone once the checksum matched (the a/f variant is the
  // entry header's); `cache verify` walks the cubin as its writer did, so a header that says sm_90a
  // of a plain sm_90 cubin (its header checksum made to match) is found there.
  const std::string root = fresh("verify-variant");
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  const full_key k = write_entries(*d, 0xA0, 1).front();
  const std::string path = d->entry_path(k);
  std::vector<std::uint8_t> b;
  {
    std::ifstream in(path, std::ios::binary);
    b.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  REQUIRE(b.size() > 128);
  REQUIRE(fatpack::core::le::load<std::uint32_t>(b.data() + 28) == 90);
  fatpack::core::le::store(b.data() + 28, std::uint32_t{90 | 0x10000});  // "sm_90a"
  fatpack::core::le::store(b.data() + 120, static_cast<std::uint64_t>(XXH3_64bits(b.data(), 120)));
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  auto a = admin::open(root, false);
  REQUIRE(a.has_value());
  bool seen = false;
  for (const auto& p : (*a)->verify(false))
    if (p.file == path) {
      seen = true;
      CHECK(p.problem == "cubin's SM (ELF e_flags and .nv.compat) does not match the entry header");
    }
  CHECK(seen);
}

TEST_CASE("scan: a fan-out directory root owns is another owner's in a user's cache, the layer's in root's tree") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: needs root to give the cache to another uid");
    return;
  }
  const std::string root = fresh("root-fan-out");
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  const auto keys = write_entries(*d, 0x900, 2);
  const std::string rooted = d->fanout_dir(keys[0].code.hash);
  REQUIRE(rooted != d->fanout_dir(keys[1].code.hash));
  // The whole tree the user's (uid 4242), but for one fan-out directory root kept (an attacker
  // review: `cache list` read its files instead of reporting it, as the runtime refuses it).
  REQUIRE(std::system(("chown -R 4242 '" + root + "' && chown 0 '" + rooted + "'").c_str()) == 0);
  faulty_fs ffs;
  ffs.fake_euid = 4242;
  std::vector<cache_dir::stray_item> strays;
  const auto items = d->scan(&strays);
  REQUIRE(strays.size() == 1);
  CHECK(strays[0].path == rooted);
  CHECK(strays[0].problem.find("owned by uid 0") != std::string::npos);
  REQUIRE(items.size() == 1);
  CHECK(items[0].path == d->entry_path(keys[1]));
  CHECK(d->scan().size() == 1);  // without `strays` too: not indexed, evicted or cleared
  // Nor does a hit read it (before: read, and put back in the index, whose eviction then removed
  // what clear and list left alone). A miss, nothing removed.
  sass_bytes cubin;
  entry_header h;
  std::string drv, problem;
  const expected_key want{&keys[0].code, &keys[0].driver, 90};
  CHECK(d->read_entry(d->entry_path(keys[0]), want, cubin, h, drv, problem) == read_status::missing);
  CHECK(problem.find("owned by uid 0") != std::string::npos);
  CHECK_FALSE(d->read_exact(keys[0], 90).has_value());
  CHECK(std::ifstream(d->entry_path(keys[0])).good());
  CHECK(d->read_exact(keys[1], 90).has_value());
  // In a tree root owns (a layer root installed, listed by another user), root's fan-out directory
  // and entries are the layer's: admin::open reads it as one (prebuilt), and so does the runtime.
  REQUIRE(std::system(("chown 0 '" + root + "/v1/objects' && chown 0 '" + d->entry_path(keys[1]) + "'").c_str()) == 0);
  auto layer = cache_dir::open(root, false, 0, "listed", true);
  strays.clear();
  CHECK(layer->scan(&strays).size() == 2);
  CHECK(strays.empty());
  CHECK(layer->read_exact(keys[0], 90).has_value());
  CHECK(layer->read_exact(keys[1], 90).has_value());
  auto listed = admin::open(root, true);
  REQUIRE(listed.has_value());
  std::vector<entry_problem> unlisted;
  CHECK((*listed)->list(&unlisted).size() == 2);
  CHECK(unlisted.empty());
  for (const auto& p : (*listed)->verify(false)) CHECK_MESSAGE(p.file.find("/objects/") == std::string::npos, p.problem);
}

TEST_CASE("index: damaged, missing or garbage -> rebuilt from the entries; lookups never depend on it") {
  const std::string root = fresh("index");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  std::string why;
  const std::vector<full_key> keys = write_entries(*d, 100, 20);
  auto idx = d->index();
  REQUIRE(idx);
  const std::uint64_t total = idx->total_bytes();
  CHECK(idx->live() == 20);
  CHECK(total > 0);
  CHECK(idx->file_bytes() == index_header_bytes + std::uint64_t(default_index_capacity) * index_slot_bytes);
  const std::string path = d->dir() + "/index.v1";
  // Garbage over the header (another process's view: a fresh cache_dir).
  {
    FILE* f = std::fopen(path.c_str(), "r+b");
    REQUIRE(f);
    std::vector<char> junk(512, 'x');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  auto d2 = cache_dir::open(root, true, 1ull << 30, "user", false);
  auto idx2 = d2->index();
  REQUIRE(idx2);
  CHECK(idx2->live() == 20);
  CHECK(idx2->total_bytes() == total);
  for (const auto& k : keys) CHECK(d2->read_exact(k, 90).has_value());
  // Garbage in the slots: readers skip them; entries are still served.
  {
    FILE* f = std::fopen(path.c_str(), "r+b");
    REQUIRE(f);
    std::fseek(f, static_cast<long>(index_header_bytes), SEEK_SET);
    // Half the slots (inside the file: a longer file is refused as a whole and rebuilt).
    std::vector<char> junk(index_slot_bytes * (default_index_capacity / 2), 0x5a);
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  auto d3 = cache_dir::open(root, true, 1ull << 30, "user", false);
  for (const auto& k : keys) CHECK(d3->read_exact(k, 90).has_value());
  CHECK(d3->index()->damaged_slots() > 0);
  // Truncated index file (shorter than its capacity says): not mapped, rebuilt.
  REQUIRE(::truncate(path.c_str(), 10000) == 0);
  auto d4 = cache_dir::open(root, true, 1ull << 30, "user", false);
  REQUIRE(d4->index());
  CHECK(d4->index()->live() == 20);
  // Missing: rebuilt.
  auto stale = d4->index();
  REQUIRE(::unlink(path.c_str()) == 0);
  auto d5 = cache_dir::open(root, true, 1ull << 30, "user", false);
  REQUIRE(d5->index());
  CHECK(d5->index()->live() == 20);
  // A process still mapping the deleted file notices at its next index update and uses the new one.
  const full_key extra = make_full_key(key_for(999));
  REQUIRE(d4->write(extra, fatpack::core::byte_span(cubin90()), why) == 0);
  CHECK(d4->index() != stale);
  CHECK(d5->index()->live() == 21);
  CHECK(stale->live() == 20);
  // Read-only without an index: other-driver lookups list the one fan-out directory instead.
  REQUIRE(::unlink(path.c_str()) == 0);
  auto ro = cache_dir::open(root, false, 0, "ro", false);
  REQUIRE(::unlink(d->entry_path(extra).c_str()) == 0);
  CHECK(ro->index() == nullptr);
  const full_key newer = make_full_key(key_for(100, 90, 13010));
  std::string from;
  CHECK(ro->read_other_driver(newer, 90, from).has_value());
  CHECK(from == "13000");
}

TEST_CASE("index: a forged capacity or live count (with a valid header checksum) is bounded, never allocated or walked") {
  const std::string root = fresh("forged_index");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  std::string why;
  std::vector<full_key> keys = write_entries(*cache_dir::open(root, true, 1ull << 30, "user", false), 300, 3);
  const std::string path = root + "/v1/index.v1";
  // Rewrites header fields, then the header's checksum (XXH3 of its first 24 bytes, at 24), as
  // anyone who can write the directory can.
  auto forge = [&](std::uint32_t capacity, std::uint64_t live, std::uint64_t file_size) {
    std::vector<std::uint8_t> h = read_file(path);
    REQUIRE(h.size() >= index_header_bytes);
    for (int i = 0; i < 4; ++i) h[12 + i] = static_cast<std::uint8_t>(capacity >> (8 * i));
    for (int i = 0; i < 8; ++i) h[48 + i] = static_cast<std::uint8_t>(live >> (8 * i));
    const std::uint64_t check = XXH3_64bits(h.data(), 24);
    for (int i = 0; i < 8; ++i) h[24 + i] = static_cast<std::uint8_t>(check >> (8 * i));
    h.resize(index_header_bytes);
    fatpack_test::write_file(path, h);
    REQUIRE(::truncate(path.c_str(), static_cast<off_t>(file_size)) == 0);  // sparse
  };
  auto check_served = [&](const std::string& what) {
    CAPTURE(what);
    auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
    for (const auto& k : keys) CHECK(d->read_exact(k, 90).has_value());
    const full_key extra = make_full_key(key_for(400 + static_cast<int>(keys.size())));
    REQUIRE(d->write(extra, fatpack::core::byte_span(cubin90()), why) == 0);
    keys.push_back(extra);
    auto idx = d->index();
    REQUIRE(idx);
    CHECK(idx->live() == keys.size());
    CHECK(idx->capacity() <= 2 * default_index_capacity);
    CHECK(idx->file_bytes() <= index_header_bytes + 2ull * default_index_capacity * index_slot_bytes);
  };
  // Capacity 2^31-1: its size (96 GiB, sparse) matches, and doubling it wrapped in 32 bits (a 206 GB
  // allocation: bad_alloc on every lookup, the entries never served again).
  forge(0x7fffffffu, 3, index_header_bytes + std::uint64_t(0x7fffffffu) * index_slot_bytes);
  check_served("capacity 2^31-1");
  // Just over the bound in a file under max_index_bytes: refused by its capacity, not its size.
  forge(max_index_capacity + 1, 3, index_header_bytes + std::uint64_t(max_index_capacity + 1) * index_slot_bytes);
  check_served("capacity 2^20+1");
  // A live count that says full: one rebuild, at a bounded size, with the true count.
  forge(default_index_capacity, std::uint64_t(1) << 62, index_header_bytes + std::uint64_t(default_index_capacity) * index_slot_bytes);
  check_served("live 2^62");
}

TEST_CASE("index: a full table grows into a new file; capacity stays a power of two") {
  const std::string root = fresh("grow");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  const std::string path = root + "/v1/index.v1";
  std::vector<index_slot> none;
  REQUIRE(index_file::create(path, none, 64, 0) == 0);  // a tiny index: grows after ~44 entries
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  REQUIRE(d->index()->capacity() == 64);
  std::string why;
  for (int i = 0; i < 60; ++i) REQUIRE(d->write(make_full_key(key_for(5000 + i)), fatpack::core::byte_span(cubin90()), why) == 0);
  auto idx = d->index();
  CHECK(idx->capacity() >= 128);
  CHECK(idx->live() == 60);
}

TEST_CASE("locks: the per-key lock excludes threads of one process; waits are bounded; ready ends a wait") {
  const std::string root = fresh("locks");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  const std::string lf = root + "/v1/inflight.lock";
  key_lock::outcome o;
  std::string why;
  auto held = key_lock::acquire(lf, 42, 100, nullptr, o, why);
  REQUIRE(o == key_lock::outcome::acquired);
  CHECK(key_lock::try_acquire(lf, 42) == nullptr);  // same process, other thread or not: excluded
  CHECK(key_lock::try_acquire(lf, 43) != nullptr);  // another key is free
  auto t0 = std::chrono::steady_clock::now();
  auto timed = key_lock::acquire(lf, 42, 150, nullptr, o, why);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(o == key_lock::outcome::timed_out);
  CHECK(ms >= 140);
  CHECK(ms < 1500);
  int polls = 0;
  auto ready = key_lock::acquire(lf, 42, 5000, [&] { return ++polls == 3; }, o, why);
  CHECK(o == key_lock::outcome::ready);
  std::thread th([&] {
    key_lock::outcome o2;
    std::string w2;
    auto l = key_lock::acquire(lf, 42, 5000, nullptr, o2, w2);
    CHECK(o2 == key_lock::outcome::acquired_after_wait);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  held.reset();  // the waiting thread gets it
  th.join();
  // dir_lock: the in-process mutex keeps a second thread out even though fcntl locks would not.
  auto dl = dir_lock::get(root + "/v1/index.lock", why);
  REQUIRE(dl);
  REQUIRE(dl->lock(why));
  bool other = true;
  std::thread t2([&] { other = dl->try_lock(); });
  t2.join();
  CHECK_FALSE(other);
  dl->unlock();
  CHECK(dir_lock::get(root + "/v1/index.lock", why) == dl);  // one object per file per process
}

namespace {

// The heartbeat and pid of the record of lock offset `off` in a holders table ("FPKH" slots of 64
// bytes; docs/cache.md §4); false when the slot holds no record of that offset.
bool slot_of(const std::string& table, std::uint64_t off, std::uint64_t& beat, std::uint32_t& pid) {
  std::ifstream in(table, std::ios::binary);
  std::string t((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t at = (off % holder_slots) * holder_record_size;
  if (t.size() < at + holder_record_size || t.compare(at, 4, "FPKH") != 0) return false;
  auto le = [&](std::size_t p, int n) {
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v * 256 + static_cast<unsigned char>(t[at + p + i]);
    return v;
  };
  if (le(8, 4) != off) return false;
  pid = static_cast<std::uint32_t>(le(12, 4));
  beat = le(24, 8);
  return true;
}

}  // namespace

TEST_CASE("holder records: written while a key lock is held; the heartbeat ticks (also in a forked child); zeroed at release") {
#if defined(__SANITIZE_THREAD__)
  // TSan stops a child that starts threads after a fork() of a multi-threaded process ("starting
  // new threads after multi-threaded fork is not supported"), and this case's forked holder starts
  // its ticker thread. The holder records run under TSan in cache_process_test (real processes).
  MESSAGE("SKIPPED under TSan: the forked holder starts its ticker thread, which TSan does not support; this case runs in the normal and ASan builds");
  return;
#endif
  const std::string root = fresh("holders");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  const std::string lf = root + "/v1/inflight.lock", table = root + "/v1/inflight.holders";
  CHECK(holders_path(lf) == table);
  key_lock::outcome o;
  std::string why;
  auto held = key_lock::acquire(lf, 42, 100, nullptr, o, why);
  REQUIRE(o == key_lock::outcome::acquired);
  std::uint64_t beat = 0;
  std::uint32_t pid = 0;
  REQUIRE(slot_of(table, 42, beat, pid));
  CHECK(pid == static_cast<std::uint32_t>(::getpid()));
  CHECK(beat == 0);
  // A forked child's own ticker (the parent's ticker thread, running now, is not in the child); it
  // runs while the parent waits below.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    key_lock::outcome co;
    std::string cw;
    auto mine = key_lock::acquire(lf, 4242, 100, nullptr, co, cw);
    if (co != key_lock::outcome::acquired) ::_exit(2);
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    std::uint64_t b = 0;
    std::uint32_t p = 0;
    if (!slot_of(table, 4242, b, p) || p != static_cast<std::uint32_t>(::getpid())) ::_exit(3);
    ::_exit(b >= 1 ? 0 : 4);
  }
  // A waiter (its own description: it waits as another process would) behind this live process:
  // the heartbeat moves, so it waits the whole bound, longer than its stall bound, and says nothing
  // about the holder.
  auto waited = key_lock::acquire(lf, 42, 6000, nullptr, o, why, 3);
  CHECK(o == key_lock::outcome::timed_out);
  CHECK(why.empty());
  REQUIRE(slot_of(table, 42, beat, pid));
  CHECK(beat >= 3);
  int st = 0;
  REQUIRE(::waitpid(child, &st, 0) == child);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  held.reset();
  CHECK_FALSE(slot_of(table, 42, beat, pid));  // zeroed before the unlock
  // Locks taken without waiting (eviction, quarantine) write no record.
  auto quick = key_lock::try_acquire(lf, 43);
  REQUIRE(quick);
  CHECK_FALSE(slot_of(table, 43, beat, pid));
}

TEST_CASE("files written in place (the index, the holder table) with another hard link are not written: the linked file is left alone") {
  const std::string root = fresh("hardlinks");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  std::string why;
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  const full_key first = make_full_key(key_for(500));
  REQUIRE(d->write(first, fatpack::core::byte_span(cubin90()), why) == 0);
  d.reset();
  // index.v1 replaced by a hard link to another file that holds a valid index (a copy of it).
  const std::string index = root + "/v1/index.v1", victim = root + "/victim.index";
  fatpack_test::write_file(victim, read_file(index));
  REQUIRE(::unlink(index.c_str()) == 0);
  REQUIRE(::link(victim.c_str(), index.c_str()) == 0);
  const std::vector<std::uint8_t> victim_before = read_file(victim);
  auto d2 = cache_dir::open(root, true, 1ull << 30, "user", false);
  const full_key second = make_full_key(key_for(501));
  REQUIRE(d2->write(second, fatpack::core::byte_span(cubin90()), why) == 0);
  CHECK(read_file(victim) == victim_before);  // its slots were written through the mapping before
  REQUIRE(d2->index());
  CHECK(d2->index()->live() == 2);  // rebuilt, as a file of its own
  struct stat st{};
  REQUIRE(::stat(index.c_str(), &st) == 0);
  CHECK(st.st_nlink == 1);

  // inflight.holders: a hard link to another file; a key lock's holder record is not written there.
  const std::string lf = root + "/v1/inflight.lock", table = root + "/v1/inflight.holders";
  const std::string other = root + "/victim.txt";
  fatpack_test::write_file(other, std::vector<std::uint8_t>(8192, 'A'));
  ::unlink(table.c_str());
  REQUIRE(::link(other.c_str(), table.c_str()) == 0);
  key_lock::outcome o;
  auto held = key_lock::acquire(lf, 42, 100, nullptr, o, why);
  REQUIRE(o == key_lock::outcome::acquired);
  held.reset();
  CHECK(read_file(other) == std::vector<std::uint8_t>(8192, 'A'));
}

TEST_CASE("holder records: a stale record of a dead holder ends a wait after its 3 s grace; a damaged record never does") {
#if defined(__SANITIZE_THREAD__)
  // TSan stops a child that starts threads after a fork() of a multi-threaded process ("starting
  // new threads after multi-threaded fork is not supported"), and this case's forked holder starts
  // its ticker thread. The holder records run under TSan in cache_process_test (real processes).
  MESSAGE("SKIPPED under TSan: the forked holder starts its ticker thread, which TSan does not support; this case runs in the normal and ASan builds");
  return;
#endif
  const std::string root = fresh("holders-stale");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  const std::string lf = root + "/v1/inflight.lock", table = root + "/v1/inflight.holders";
  // A holder killed while compiling (it never zeroes its record; the kernel drops its lock), then a
  // holder whose own record could not be written: the slot names a process that is gone.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    key_lock::outcome co;
    std::string cw;
    auto l = key_lock::acquire(lf, 77, 100, nullptr, co, cw);
    ::_exit(co == key_lock::outcome::acquired ? 0 : 2);
  }
  int st = 0;
  REQUIRE(::waitpid(child, &st, 0) == child);
  REQUIRE(WEXITSTATUS(st) == 0);
  std::uint64_t beat = 0;
  std::uint32_t pid = 0;
  REQUIRE(slot_of(table, 77, beat, pid));
  CHECK(pid == static_cast<std::uint32_t>(child));
  auto blocker = key_lock::try_acquire(lf, 77);  // writes no record
  REQUIRE(blocker);
  key_lock::outcome o;
  std::string why;
  const auto t0 = std::chrono::steady_clock::now();
  auto none = key_lock::acquire(lf, 77, 30000, nullptr, o, why, 10);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(o == key_lock::outcome::timed_out);
  CHECK(why.find("pid " + std::to_string(child) + " on ") == 0);
  CHECK(why.find(" is gone") != std::string::npos);
  CHECK(s >= 3.0);   // the grace: a pid that means nothing here may be a live holder elsewhere
  CHECK(s < 25.0);   // well before the bound (loose: a loaded machine)
  blocker.reset();

  // Every bit flip of a live record is no information: never a reason to stop, never a crash.
  auto held = key_lock::acquire(lf, 88, 100, nullptr, o, why);
  REQUIRE(o == key_lock::outcome::acquired);
  const int fd = ::open(table.c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const off_t at = static_cast<off_t>((88 % holder_slots) * holder_record_size);
  std::uint8_t good[holder_record_size];
  REQUIRE(::pread(fd, good, sizeof good, at) == static_cast<ssize_t>(sizeof good));
  holder_watch w(lf, 88, 2);
  const auto now = std::chrono::steady_clock::now();
  int stops = 0;
  for (std::size_t bit = 0; bit < 8 * holder_record_size; ++bit) {
    std::uint8_t bad[holder_record_size];
    std::memcpy(bad, good, sizeof bad);
    bad[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    REQUIRE(::pwrite(fd, bad, sizeof bad, at) == static_cast<ssize_t>(sizeof bad));
    stops += !w.check(now + std::chrono::seconds(bit)).empty();  // even with its clock far on
  }
  CHECK(stops == 0);
  ::close(fd);
}

TEST_CASE("eviction: a damaged byte total in the index header evicts nothing the bound does not ask for") {
  // The header's total is not covered by its check (a counter). Before: with one high bit flipped in
  // it, every store evicted every entry (the total never came under the bound); now it is set to
  // what the live slots hold first.
  const std::string root = fresh("lru_total");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  const std::vector<full_key> keys = write_entries(*d, 0x7070, 6);
  const std::uint64_t held = d->index()->total_bytes();
  {
    const int fd = ::open((d->dir() + "/index.v1").c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    std::uint8_t b[8];
    REQUIRE(::pread(fd, b, 8, 40) == 8);
    b[5] ^= 0x01;  // bit 40: a terabyte more
    REQUIRE(::pwrite(fd, b, 8, 40) == 8);
    ::close(fd);
  }
  REQUIRE(d->index()->total_bytes() > (1ull << 40));
  evict_result r = evict_to(*d, 1ull << 30, true);
  CHECK(r.removed == 0);
  CHECK(d->index()->total_bytes() == held);
  for (const auto& k : keys) CHECK(d->read_exact(k, 90).has_value());
  // A bound the entries do exceed still evicts, by their real sizes.
  r = evict_to(*d, held / 2, true);
  CHECK(r.removed == 3);
}

TEST_CASE("eviction: least recently used first, to 90% of the bound; stray temp files cleaned") {
  const std::string root = fresh("lru");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  std::string why;
  const std::vector<full_key> keys = write_entries(*d, 200, 10);
  // Use the oldest two again: they become the most recent.
  REQUIRE(d->read_exact(keys[0], 90));
  REQUIRE(d->read_exact(keys[1], 90));
  const std::uint64_t one = d->index()->total_bytes() / 10;
  evict_result r = evict_to(*d, one * 5, true);
  CHECK(r.removed == 5);
  CHECK(d->index()->total_bytes() <= one * 5);
  CHECK(d->read_exact(keys[0], 90).has_value());
  CHECK(d->read_exact(keys[1], 90).has_value());
  for (int i = 2; i < 7; ++i) CHECK_FALSE(d->read_exact(keys[static_cast<std::size_t>(i)], 90).has_value());
  for (int i = 7; i < 10; ++i) CHECK(d->read_exact(keys[static_cast<std::size_t>(i)], 90).has_value());
  // A busy key (its lock held) is skipped.
  key_lock::outcome o;
  auto busy = key_lock::acquire(d->inflight_lock_path(), cache_dir::lock_hash(keys[9]), 10, nullptr, o, why);
  evict_to(*d, 0, true);
  CHECK(d->read_exact(keys[9], 90).has_value());
  busy.reset();
  // Stray temp files: one whose writer is gone (old), one whose writer is alive (flock held).
  const std::string fan = d->fanout_dir(keys[9].code.hash);
  const std::string dead = fan + "/.x.fpc.1.1.tmp", alive = fan + "/.y.fpc.1.2.tmp";
  REQUIRE(std::system(("touch -d '2 hours ago' '" + dead + "' '" + alive + "'").c_str()) == 0);
  int fd = ::open(alive.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(posix_fs().try_flock(fd) == 0);
  CHECK(clean_temp_files(*d, 24 * 3600) == 1);
  CHECK_FALSE(exists(dead));
  CHECK(exists(alive));
  ::close(fd);
  CHECK(clean_temp_files(*d, 24 * 3600) == 1);
}

TEST_CASE("an entry larger than the cache's size limit is not stored, and says so once; the others stay") {
  const std::string root = fresh("toobig");
  config cfg = cfg_for(root);
  auto small = disk_cache::create(cfg);
  small->store(key_for(1), fatpack::core::byte_span(cubin90()));  // a bound of 1 GiB: stored
  REQUIRE(small->find(key_for(1), false).has_value());
  std::uint64_t one = 0;  // the entry's size on disk, from the index
  {
    auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
    one = d->index()->total_bytes();
  }
  REQUIRE(one > cubin90().size());
  // A bound below one entry: before, the store went in and evicted everything else to make room,
  // leaving the cache over its bound.
  cfg.max_bytes = one - 1;
  auto c = disk_cache::create(cfg);
  log_capture logs;
  c->store(key_for(2), fatpack::core::byte_span(cubin90()));
  c->store(key_for(3), fatpack::core::byte_span(cubin90()));
  CHECK_FALSE(c->find(key_for(2), false).has_value());
  CHECK_FALSE(c->find(key_for(3), false).has_value());
  CHECK(c->find(key_for(1), false).has_value());  // nothing else was evicted for it
  CHECK(logs.count("larger than the cache's size limit") == 1);
  CHECK(c->mode() == fatpack::cache_mode::read_write);  // not a reason to stop writing
}

TEST_CASE("faults through the seam: full disk and quota degrade to read-only with one warning") {
  for (const char* op : {"allocate", "pwrite"}) {
    for (int err : {ENOSPC, EDQUOT}) {
      CAPTURE(op);
      CAPTURE(err);
      const std::string root = fresh("full");
      auto c = disk_cache::create(cfg_for(root));
      REQUIRE(c->mode() == fatpack::cache_mode::read_write);
      c->store(key_for(1), fatpack::core::byte_span(cubin90()));  // one good entry first
      REQUIRE(c->find(key_for(1), false).has_value());
      log_capture logs;
      faulty_fs ffs;
      ffs.fail[op] = err;
      for (int i = 2; i < 6; ++i) c->store(key_for(static_cast<std::uint64_t>(i)), fatpack::core::byte_span(cubin90()));
      CHECK(c->mode() == fatpack::cache_mode::read_only);
      CHECK(logs.count("disk is full") == 1);
      ffs.fail.clear();
      CHECK(c->find(key_for(1), false).has_value());  // reads still served
      CHECK_FALSE(c->find(key_for(2), false).has_value());
      CHECK(c->begin_compile(key_for(7)) == nullptr);  // read-only: no locks
      // No temp file left behind.
      auto d = cache_dir::open(root, false, 0, "x", false);
      for (const auto& it : d->scan()) CHECK_FALSE(it.temp);
    }
  }
}

TEST_CASE("a short read is a miss, never an invalid entry: the good entry is kept, one warning") {
  // Before: a read shorter than the file looked like a truncated entry, was warned about on every
  // read ("ignoring ...") and deleted from the writable cache (quarantine read it short again).
  const std::string root = fresh("shortread");
  auto c = disk_cache::create(cfg_for(root));
  c->store(key_for(1), fatpack::core::byte_span(cubin90()));
  REQUIRE(c->find(key_for(1), false).has_value());
  const std::string path = cache_dir::open(root, true, 0, "x", false)->entry_path(make_full_key(key_for(1)));
  REQUIRE(exists(path));
  const auto rejected0 = stats().rejected.load();
  log_capture logs;
  {
    faulty_fs ffs;
    ffs.short_read = true;
    CHECK_FALSE(c->find(key_for(1), false).has_value());
    CHECK_FALSE(c->find(key_for(1), false).has_value());
  }
  CHECK(exists(path));
  CHECK(stats().rejected.load() == rejected0);
  CHECK(logs.count("JIT cache") == 1);
  CHECK(logs.count("short read") == 1);
  CHECK(logs.count(path) == 1);
  CHECK(c->find(key_for(1), false).has_value());
}

TEST_CASE("an invalid entry is warned about once per process, not on every read") {
  const std::string root = fresh("invalid-once");
  {
    auto c = disk_cache::create(cfg_for(root));
    c->store(key_for(1), fatpack::core::byte_span(cubin90()));
  }
  const std::string path = cache_dir::open(root, true, 0, "x", false)->entry_path(make_full_key(key_for(1)));
  {
    // Damage the payload's last byte (the entry's checksum catches it).
    std::fstream fd(path, std::ios::in | std::ios::out | std::ios::binary);
    fd.seekg(-1, std::ios::end);
    const char last = static_cast<char>(fd.get());
    fd.seekp(-1, std::ios::end);
    fd.put(static_cast<char>(last ^ 0x5a));
  }
  config cfg = cfg_for(root);
  cfg.read_only = true;  // kept (not quarantined): met on every read
  auto c = disk_cache::create(cfg);
  log_capture logs;
  for (int i = 0; i < 3; ++i) CHECK_FALSE(c->find(key_for(1), false).has_value());
  CHECK(logs.count("ignoring " + path) == 1);
  CHECK(exists(path));
}

TEST_CASE("faults through the seam: read-only and unwritable directories, I/O errors, lock errors") {
  {
    const std::string root = fresh("erofs");
    auto pre = disk_cache::create(cfg_for(root));
    pre->store(key_for(1), fatpack::core::byte_span(cubin90()));
    for (int err : {EROFS, EACCES}) {
      log_capture logs;
      faulty_fs ffs;
      ffs.fail["open_rw"] = err;
      ffs.fail["mkdir"] = err;
      ffs.fail["open_new"] = err;
      auto c = disk_cache::create(cfg_for(root));
      CHECK(c->mode() == fatpack::cache_mode::read_only);
      CHECK(logs.count("not writable") == 1);
      CHECK(c->find(key_for(1), false).has_value());
      c->store(key_for(3), fatpack::core::byte_span(cubin90()));
      CHECK_FALSE(c->find(key_for(3), false).has_value());
    }
  }
  {
    // Cannot be created at all: memory-only.
    log_capture logs;
    faulty_fs ffs;
    ffs.fail["mkdir"] = EACCES;
    auto c = disk_cache::create(cfg_for(temp_dir() + "/never/created"));
    CHECK(c->mode() == fatpack::cache_mode::memory_only);
    CHECK(logs.count("cannot create the cache directory") == 1);
    CHECK_FALSE(c->find(key_for(1), true).has_value());
    c->store(key_for(1), fatpack::core::byte_span(cubin90()));  // no-op, no crash
  }
  {
    // EIO on read: a miss, the entry is not deleted (a transient error is not corruption).
    const std::string root = fresh("eio");
    auto c = disk_cache::create(cfg_for(root));
    c->store(key_for(1), fatpack::core::byte_span(cubin90()));
    faulty_fs ffs;
    ffs.fail["pread"] = EIO;
    CHECK_FALSE(c->find(key_for(1), false).has_value());
    ffs.fail.clear();
    CHECK(c->find(key_for(1), false).has_value());
  }
  {
    // EIO on rename: that entry is skipped, one warning, the cache stays writable.
    const std::string root = fresh("eio2");
    auto c = disk_cache::create(cfg_for(root));
    log_capture logs;
    faulty_fs ffs;
    ffs.fail["rename"] = EIO;
    c->store(key_for(1), fatpack::core::byte_span(cubin90()));
    c->store(key_for(2), fatpack::core::byte_span(cubin90()));
    CHECK(logs.count("could not be written") == 1);
    ffs.fail.clear();
    CHECK(c->mode() == fatpack::cache_mode::read_write);
    c->store(key_for(3), fatpack::core::byte_span(cubin90()));
    CHECK(c->find(key_for(3), false).has_value());
  }
  {
    // Lock errors (ENOLCK: e.g. NFS without a lock daemon): one warning, read-only.
    const std::string root = fresh("enolck");
    auto c = disk_cache::create(cfg_for(root));
    log_capture logs;
    faulty_fs ffs;
    ffs.fail["byte_lock"] = ENOLCK;
    CHECK(c->begin_compile(key_for(1)) == nullptr);
    CHECK(c->begin_compile(key_for(2)) == nullptr);
    CHECK(c->mode() == fatpack::cache_mode::read_only);
    CHECK(logs.count("per-key lock failed") == 1);
  }
}

TEST_CASE("a setuid or setgid program uses no fleet cache from the environment") {
  // The invoking user sets FATPACK_CACHE_REMOTE; the key (a path) is ignored in such a program, so
  // an unsigned store of that user's choosing would be run with the program's privileges.
  const std::string root = fresh("suid_remote");
  setenv("FATPACK_CACHE_REMOTE", "http://127.0.0.1:9/fleet", 1);
  std::shared_ptr<sass_cache> local = disk_cache::create(cfg_for(root));
  CHECK(fatpack::detail::remote::with_remote_from_env(local, root) != local);  // a plain process uses it
  {
    faulty_fs ffs;
    ffs.privileged = true;
    CHECK(fatpack::detail::remote::with_remote_from_env(local, root) == local);
  }
  unsetenv("FATPACK_CACHE_REMOTE");
}

TEST_CASE("policy through the seam: NFS read-only, setuid disabled, foreign owner and open modes refused") {
  const std::string root = fresh("policy");
  {
    faulty_fs ffs;
    ffs.network = true;
    dir_verdict v = prepare_user_dir(root, false);
    CHECK(v.access == dir_access::read_only);
    CHECK(v.warning.find("network file system") != std::string::npos);
  }
  {
    faulty_fs ffs;
    ffs.privileged = true;
    dir_verdict v = prepare_user_dir(root, false);
    CHECK(v.access == dir_access::refused);
    CHECK(v.warning.find("setuid") != std::string::npos);
    CHECK(check_prebuilt_dir(root).access == dir_access::refused);
    auto c = disk_cache::create(cfg_for(root));
    CHECK(c->mode() == fatpack::cache_mode::memory_only);
  }
  {
    faulty_fs ffs;
    ffs.fake_euid = 4242;  // as if another user owned the directory
    dir_verdict v = prepare_user_dir(root, false);
    CHECK(v.access == dir_access::refused);
    CHECK(v.warning.find("owned by uid") != std::string::npos);
    // Entries owned by another user are not served either.
    sass_bytes cubin;
    entry_header h;
    std::string drv, problem;
    ffs.fake_euid = 0xFFFFFFFF;
    auto w = cache_dir::open(root, true, 1ull << 30, "w", false);
    std::string why;
    const full_key k = make_full_key(key_for(9));
    REQUIRE(w->write(k, fatpack::core::byte_span(cubin90()), why) == 0);
    ffs.fake_euid = 4242;
    auto d = cache_dir::open(root, false, 0, "x", true);  // a layer root owns, as the test runs as root
    const expected_key want{&k.code, &k.driver, 90};
    // Another user's (not root's: in a tree root owns, root's entries are the tree's, as a layer's);
    // as another user, the real owner is that other user already.
    // Not root: the fan-out directory is that user's too, and refused first (a miss, as every scan).
    const bool as_root = ::geteuid() == 0;
    if (as_root) REQUIRE(::chown(d->entry_path(k).c_str(), 4243, static_cast<gid_t>(-1)) == 0);
    CHECK(d->read_entry(d->entry_path(k), want, cubin, h, drv, problem) ==
          (as_root ? read_status::invalid : read_status::missing));
    CHECK(problem.find("owned by uid " + std::to_string(as_root ? 4243u : ::geteuid())) != std::string::npos);
  }
  REQUIRE(posix_fs().chmod(root, 0770) == 0);
  CHECK(prepare_user_dir(root, false).access == dir_access::refused);
  REQUIRE(posix_fs().chmod(root, 0700) == 0);
  CHECK(prepare_user_dir(root, false).access == dir_access::read_write);
  CHECK(prepare_user_dir("relative/path", false).access == dir_access::refused);
}

TEST_CASE("admin: list spells an entry's target with its a or f suffix (sm_100f, not sm_100)") {
  const std::string root = fresh("admin_family");
  auto c = disk_cache::create(cfg_for(root));
  const auto cubin100f = read_file(artifact("vadd.sm_100f.cubin"));
  c->store(key_for(0x100f, 100), fatpack::core::byte_span(cubin100f));
  c->store(key_for(0x90a, 90), fatpack::core::byte_span(read_file(artifact("vadd.sm_90a.cubin"))));
  c->store(key_for(0x90, 90), fatpack::core::byte_span(cubin90()));
  auto a = admin::open(root, true);
  REQUIRE(a.has_value());
  auto l = (*a)->list();
  REQUIRE(l.size() == 3);
  std::vector<std::string> targets;
  for (const auto& e : l) targets.push_back(e.target);
  std::sort(targets.begin(), targets.end());
  CHECK(targets == std::vector<std::string>{"sm_100f", "sm_90", "sm_90a"});
  for (const auto& e : l) {
    CHECK(e.arch_specific == (e.target == "sm_90a"));
    CHECK(e.sm == (e.target == "sm_100f" ? 100u : 90u));
  }
}

TEST_CASE("admin: verify --repair says why a directory planted at an entry's name is not removed") {
  // Before: unlink failed (EISDIR) and the problem read "not a regular file" with nothing more, so
  // `cache verify --repair` exited 1 without saying what it could not do.
  const std::string root = fresh("admin_dir_entry");
  auto c = disk_cache::create(cfg_for(root));
  c->store(key_for(0xd1), fatpack::core::byte_span(cubin90()));
  auto a = admin::open(root, false);
  REQUIRE(a.has_value());
  auto l = (*a)->list();
  REQUIRE(l.size() == 1);
  const std::string path = l[0].file;
  REQUIRE(std::remove(path.c_str()) == 0);
  REQUIRE(::mkdir(path.c_str(), 0700) == 0);
  REQUIRE(std::system(("touch '" + path + "/inner'").c_str()) == 0);
  bool seen = false;
  for (const auto& p : (*a)->verify(true)) {
    if (p.file != path) continue;
    seen = true;
    CHECK_FALSE(p.removed);
    CHECK_MESSAGE(p.problem.find("not removed: ") != std::string::npos, p.problem);
  }
  CHECK(seen);
  REQUIRE(std::system(("rm -rf '" + path + "'").c_str()) == 0);
}

// KNOWN BUG, skipped until the read path (runtime/src/cache/store.cpp, being rewritten) checks the
// entry's mode: read_entry checks the file's type and owner, not its mode, so an entry file that group
// or others may write is served. In a prebuilt layer (readable by every user, its directories checked
// to be writable by nobody else) such a file is one any local user can rewrite with a valid entry for
// the same key holding their own cubin, which every user's process then loads (also the per-user
// cache's files: only its 0700 directories keep others out). Remove the skip with the fix.
TEST_CASE("a prebuilt layer's entry file writable by group or others is not served") {
  const std::string root = fresh("prebuilt_ww_entry");
  const full_key k = make_full_key(key_for(0x66, 90));
  {
    auto w = cache_dir::open(root, true, 1ull << 30, "user", false);
    std::string why;
    REQUIRE(w->write(k, fatpack::core::byte_span(cubin90()), why) == 0);
  }
  auto layer = cache_dir::open(root, false, 0, "prebuilt", true);
  REQUIRE(layer->read_exact(k, 90).has_value());  // 0600: served
  for (unsigned mode : {0620u, 0602u, 0666u}) {
    CAPTURE(mode);
    REQUIRE(::chmod(layer->entry_path(k).c_str(), mode) == 0);
    CHECK_FALSE(layer->read_exact(k, 90).has_value());
  }
}

TEST_CASE("admin: verify refuses an entry whose cubin is not for its key's CC, as the runtime does") {
  // A cubin for sm_80 under a key for CC 9.0 (header SM and checksums consistent): the runtime refuses
  // it ("the key wants sm_90") and quarantines it; before, verify called it ok (it checked no target).
  const std::string root = fresh("admin_wrong_cc");
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  const full_key k = make_full_key(key_for(0xcc80, 90));
  std::string why;
  REQUIRE(d->write(k, fatpack::core::byte_span(read_file(artifact("vadd.sm_80.cubin"))), why) == 0);
  auto a = admin::open(root, false);
  REQUIRE(a.has_value());
  auto problems = (*a)->verify(false);
  bool seen = false;
  for (const auto& p : problems) seen |= p.file == d->entry_path(k) && p.problem.find("sm_90") != std::string::npos;
  CHECK(seen);
  CHECK_FALSE(d->read_exact(k, 90).has_value());  // what the runtime does with it
}

TEST_CASE("admin: verify and list read a large entry, never map it (the directory may be rewritten in place)") {
  // `fatpack cache verify` / `list` / `doctor` open any directory read-only: a prebuilt layer, a cache
  // on NFS. Their entries were mapped as the per-user cache's are, so an entry truncated by a `cp`
  // over it (or by another host) while it was checked killed the command with SIGBUS.
  auto big = cubin90();
  big.resize(max_entry_front + 100 * 1024, 0);
  const full_key k = make_full_key(key_for(611));
  const std::string root = fresh("admin-nomap");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  std::string path;
  {
    auto w = cache_dir::open(root, true, 1ull << 30, "user", false, entry_codec::stored);
    std::string why;
    REQUIRE(w->write(k, fatpack::core::byte_span(big), why) == 0);
    path = w->entry_path(k);
  }
  for (const bool read_only : {true, false}) {
    CAPTURE(read_only);
    auto a = admin::open(root, read_only);
    REQUIRE(a.has_value());
    faulty_fs ffs;
    CHECK((*a)->verify(false).empty());
    CHECK((*a)->list().size() == 1);
    CHECK(ffs.map_reads == 0);
  }
  // The entry is truncated (`cp` over it) after the read of its header and key texts: the cubin's
  // read sees the short file and says so; a mapping of it faulted.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto a = admin::open(root, true);
    if (!a) ::_exit(2);
    faulty_fs ffs;
    struct stat es{};
    if (::stat(path.c_str(), &es) != 0) ::_exit(4);
    int fronts = 0;  // verify reads the entry's front twice: its header check, then the entry read
    ffs.after_pread = [&](int fd, std::uint64_t off) {
      struct stat fs{};
      if (off == 0 && ::fstat(fd, &fs) == 0 && fs.st_ino == es.st_ino && ++fronts == 2)
        (void)::truncate(path.c_str(), 4096);
    };
    const auto problems = (*a)->verify(false);
    ::_exit(problems.empty() ? 3 : 0);
  }
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  CHECK_FALSE(WIFSIGNALED(st));
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

TEST_CASE("admin: stats, list, verify (and repair), prune, clear") {
  const std::string root = fresh("admin");
  auto c = disk_cache::create(cfg_for(root));
  for (int i = 0; i < 6; ++i) c->store(key_for(300 + static_cast<std::uint64_t>(i)), fatpack::core::byte_span(cubin90()));
  auto a = admin::open(root, false);
  REQUIRE(a.has_value());
  disk_stats s = (*a)->stats();
  CHECK(s.entries == 6);
  CHECK(s.index_ok);
  CHECK(s.index_entries == 6);
  CHECK(s.index_total_bytes == s.bytes);
  CHECK(s.cubin_bytes == 6 * cubin90().size());
  // The whole directory (issue 13): root, v1, objects, the fan-outs, 6 entries, the index, the lock
  // files; at least the entries and the index; a small index (52 KiB), not a 3 MiB one.
  CHECK(s.dir_items >= 3 + 6 + 1);
  CHECK(s.dir_apparent_bytes >= s.bytes + s.index_bytes);
  CHECK(s.index_bytes == index_header_bytes + std::uint64_t(default_index_capacity) * index_slot_bytes);
  CHECK(s.index_bytes <= 64 * 1024);
  CHECK(s.dir_allocated_bytes > 0);
  {
    // A file added anywhere under the directory is counted, with its size.
    FILE* f = std::fopen((root + "/v1/stray.bin").c_str(), "wb");
    REQUIRE(f);
    std::vector<char> junk(100000, 'x');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
    const disk_stats t = (*a)->stats();
    CHECK(t.dir_items == s.dir_items + 1);
    CHECK(t.dir_apparent_bytes == s.dir_apparent_bytes + 100000);
    CHECK(t.dir_allocated_bytes >= s.dir_allocated_bytes + 100000 / 4096 * 4096);
    std::remove((root + "/v1/stray.bin").c_str());
  }
  auto l = (*a)->list();
  REQUIRE(l.size() == 6);
  CHECK(l[0].sm == 90);
  CHECK(l[0].code_text.find("cc=90") != std::string::npos);
  CHECK(l[0].driver_text == "13000");
  CHECK(l[0].last_use_unix_s > 0);
  CHECK((*a)->verify(false).empty());
  // Damage one entry and leave a stray temp file.
  const std::string victim = l[2].file;
  {
    FILE* f = std::fopen(victim.c_str(), "r+b");
    REQUIRE(f);
    std::fseek(f, -3, SEEK_END);
    std::fputc(0xff, f);
    std::fclose(f);
  }
  const std::string stray = victim.substr(0, victim.rfind('/')) + "/.dead.fpc.9.9.tmp";
  REQUIRE(std::system(("touch -d '2 hours ago' '" + stray + "'").c_str()) == 0);
  auto problems = (*a)->verify(false);
  REQUIRE(problems.size() >= 2);
  bool saw_victim = false, saw_stray = false;
  for (const auto& p : problems) {
    saw_victim |= p.file == victim;
    saw_stray |= p.file == stray && p.problem.find("stray") != std::string::npos;
  }
  CHECK(saw_victim);
  CHECK(saw_stray);
  auto ro = admin::open(root, true);
  REQUIRE(ro.has_value());
  CHECK((*ro)->verify(true).size() == problems.size());  // read-only: reports, removes nothing
  auto fixed = (*a)->verify(true);
  for (const auto& p : fixed) CHECK(p.removed);
  CHECK((*a)->verify(false).empty());
  CHECK((*a)->stats().entries == 5);
  // Prune to about two entries.
  const std::uint64_t one = (*a)->stats().bytes / 5;
  prune_result pr = (*a)->prune(one * 2);
  CHECK(pr.removed == 3);
  CHECK(pr.bytes_left <= one * 2);
  CHECK((*a)->stats().entries == 2);
  REQUIRE((*a)->clear());
  CHECK((*a)->stats().entries == 0);
  CHECK((*a)->stats().index_entries == 0);
  // Read-only open of a missing cache: empty, not an error. Relative paths are.
  auto missing = admin::open(temp_dir() + "/no-cache-here", true);
  REQUIRE(missing.has_value());
  CHECK((*missing)->stats().entries == 0);
  CHECK_FALSE(admin::open("relative", true).has_value());
}

TEST_CASE("warm: PTX compiled for targets that are not present (CU_JIT_TARGET), then served to such a GPU") {
  const std::string root = fresh("warm");
  auto ptx = read_file(artifact("vadd.compute_80.ptx"));
  auto sass = read_file(artifact("vadd.sm_90.cubin"));
  std::vector<fatpack::core::entry_input> entries;
  for (auto* item : {&ptx, &sass}) {
    auto r = fatpack::core::import_input(fatpack::core::byte_span(*item), "vadd", "vadd");
    REQUIRE(r.has_value());
    for (auto& e : r.value()) entries.push_back(std::move(e));
  }
  const std::string pkg = fatpack_test::package_file("warm", entries);
  auto a = admin::open(root, false);
  REQUIRE(a.has_value());
  warm_options o;
  o.targets = {parse_warm_target("sm_86").value(), parse_warm_target("sm_120").value(), parse_warm_target("9.0").value()};
  std::size_t progress = 0;
  o.progress = [&](const warm_item&, std::size_t done, std::size_t total) {
    progress = done;
    CHECK(total == 3);
  };
  auto items = warm_packages(**a, {pkg}, o);
  REQUIRE_MESSAGE(items.has_value(), items.error().message);
  REQUIRE(items->size() == 3);
  CHECK(progress == 3);
  CHECK((*items)[0].result == warm_item::outcome::compiled);
  CHECK((*items)[1].result == warm_item::outcome::compiled);
  CHECK((*items)[2].result == warm_item::outcome::has_sass);  // sm_90 SASS in the package
  auto l = (*a)->list();
  REQUIRE(l.size() == 2);
  std::vector<std::uint32_t> sms{l[0].sm, l[1].sm};
  std::sort(sms.begin(), sms.end());
  CHECK(sms == std::vector<std::uint32_t>{86, 120});
  auto again = warm_packages(**a, {pkg}, o);
  REQUIRE(again.has_value());
  CHECK((*again)[0].result == warm_item::outcome::already_cached);
  CHECK_FALSE(parse_warm_target("gpu").has_value());
  CHECK(parse_warm_target("sm_90a").value() == 90);
}

TEST_CASE("a hit never rebuilds a missing index on the loading thread; the next store does") {
  // Rebuilding scans every entry of the directory. Before: the first read of a process whose
  // directory had lost its index did that scan inline, on the thread that was loading a module.
  const std::string root = fresh("no-rebuild-on-read");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  std::string why;
  std::vector<full_key> keys = write_entries(*cache_dir::open(root, true, 1ull << 30, "user", false), 300, 5);
  const std::string index_path = root + "/v1/index.v1";
  REQUIRE(::unlink(index_path.c_str()) == 0);
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  for (const auto& k : keys) CHECK(d->read_exact(k, 90).has_value());
  std::string from;
  CHECK(d->read_other_driver(make_full_key(key_for(300, 90, 13010)), 90, from).has_value());
  struct stat st{};
  CHECK(::stat(index_path.c_str(), &st) != 0);  // no index was built by the reads
  REQUIRE(d->write(make_full_key(key_for(399)), fatpack::core::byte_span(cubin90()), why) == 0);
  REQUIRE(::stat(index_path.c_str(), &st) == 0);  // the store rebuilt it, with every entry
  auto idx = d->index();
  REQUIRE(idx);
  CHECK(idx->live() == 6);
}

TEST_CASE("verify --repair and clear never follow a symlink planted as objects/<ab>") {
  // Before: scan() listed the symlink's target and clear/verify --repair deleted what was there.
  const std::string root = fresh("symlink-fan");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  std::string why;
  {
    auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
    REQUIRE(d->write(make_full_key(key_for(500)), fatpack::core::byte_span(cubin90()), why) == 0);
  }
  const std::string outside = fresh("symlink-victim");
  REQUIRE(make_dirs(posix_fs(), outside, 0700) == 0);
  const std::string victim = outside + "/precious.fpc";
  fatpack_test::write_file(victim, std::vector<std::uint8_t>{1, 2, 3});
  fatpack_test::write_file(outside + "/.x.1.1.tmp", std::vector<std::uint8_t>{4});
  REQUIRE(::symlink(outside.c_str(), (root + "/v1/objects/zz").c_str()) == 0);
  auto a = admin::open(root, false);
  REQUIRE(a.has_value());
  (void)(*a)->verify(true);
  CHECK((*a)->list().size() == 1);
  CHECK((*a)->clear().ok());
  struct stat st{};
  CHECK(::stat(victim.c_str(), &st) == 0);
  CHECK(::stat((outside + "/.x.1.1.tmp").c_str(), &st) == 0);
  CHECK((*a)->list().empty());
}

TEST_CASE("checking a directory again does not drop this process's lock on index.lock") {
  // fcntl locks belong to the process and any close of the file drops them. Before: every
  // prepare_user_dir (each cache opened on the directory) opened and closed index.lock, so a lock
  // this process held on it was silently gone and another process could take it.
  const std::string root = fresh("keep-lock");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  std::string why;
  auto l = dir_lock::get(root + "/v1/index.lock", why);
  REQUIRE_MESSAGE(l, why);
  REQUIRE(l->lock(why));
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  // Another process asks for the same lock without waiting: it must be refused.
  const pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open((root + "/v1/index.lock").c_str(), O_RDWR | O_CLOEXEC);
    struct flock fl{};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    const int r = fd < 0 ? -1 : ::fcntl(fd, F_SETLK, &fl);
    ::_exit(fd < 0 ? 2 : r == 0 ? 1 : 0);  // 0: refused (the parent still holds it)
  }
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  l->unlock();
}

TEST_CASE("warm selects as the runtime does: Tegra CCs and the policy from the environment") {
  // sm_80 SASS + compute_80 PTX. CC 8.6 runs the sm_80 SASS (minor-version compatibility); CC 8.7 is a
  // Tegra (Orin), which has none: the runtime JIT-compiles the PTX there, so warm must too. Before,
  // warm ignored Tegra and the policy and reported "has SASS" for sm_87, and the prebuilt cache
  // then missed where it mattered.
  const std::string root = fresh("warm-tegra");
  std::vector<fatpack::core::entry_input> entries;
  for (const char* f : {"vadd.compute_80.ptx", "vadd.sm_80.cubin"}) {
    auto bytes = read_file(artifact(f));
    auto r = fatpack::core::import_input(fatpack::core::byte_span(bytes), f, "vadd");
    REQUIRE(r.has_value());
    for (auto& e : r.value()) entries.push_back(std::move(e));
  }
  const std::string pkg = fatpack_test::package_file("warm-tegra", entries);
  auto a = admin::open(root, false);
  REQUIRE(a.has_value());
  warm_options o;
  o.targets = {86, 87};
  auto items = warm_packages(**a, {pkg}, o);
  REQUIRE_MESSAGE(items.has_value(), items.error().message);
  REQUIRE(items->size() == 2);
  CHECK((*items)[0].result == warm_item::outcome::has_sass);
  CHECK((*items)[1].result == warm_item::outcome::compiled);
  CHECK((*items)[1].entry.find("compute_80") != std::string::npos);
  auto l = (*a)->list();
  REQUIRE(l.size() == 1);
  CHECK(l[0].sm == 87);
  // FATPACK_FORCE_PTX_JIT: a load on CC 8.6 would JIT, so warm compiles for it too.
  setenv("FATPACK_FORCE_PTX_JIT", "1", 1);
  auto forced = warm_packages(**a, {pkg}, o);
  unsetenv("FATPACK_FORCE_PTX_JIT");
  REQUIRE(forced.has_value());
  CHECK((*forced)[0].result == warm_item::outcome::compiled);
  CHECK((*forced)[1].result == warm_item::outcome::already_cached);
}

#include "fatpack/fatpack.h"

TEST_CASE("public API: counters, status and layers through C++ and C") {
  // FATPACK_CACHE_DISABLE=1 in this process (g_env): the API says so and refuses layers.
  CHECK(fatpack::cache_status().mode == fatpack::cache_mode::disabled);
  CHECK(std::string(fatpack_cache_mode()) == "disabled");
  CHECK(fatpack_cache_get_mode() == FATPACK_CACHE_MODE_DISABLED);
  CHECK(std::string(fatpack_cache_path()).empty());
  auto s = fatpack::add_prebuilt_cache("/nonexistent");
  CHECK_FALSE(s.ok());
  CHECK(s.error().message.find("disabled") != std::string::npos);
  CHECK(fatpack_add_prebuilt_cache("/nonexistent") == FATPACK_ERROR_INVALID_ARGUMENT);
  CHECK(fatpack_add_prebuilt_cache(nullptr) == FATPACK_ERROR_INVALID_ARGUMENT);
  // A disk cache installed: the counters move and C sees the same numbers.
  const std::string root = fresh("api");
  auto c = disk_cache::create(cfg_for(root));
  set_sass_cache(c);
  CHECK(fatpack::cache_status().mode == fatpack::cache_mode::read_write);
  CHECK(fatpack::cache_status().path == root);
  CHECK(fatpack_cache_get_mode() == FATPACK_CACHE_MODE_READ_WRITE);
  {
    // Both strings at once (as in one printf): each function has its own storage.
    const char* path = fatpack_cache_path();
    const char* mode = fatpack_cache_mode();
    CHECK(std::string(path) == root);
    CHECK(std::string(mode) == "read-write");
    const char* path_again = fatpack_cache_path();
    CHECK(std::string(mode) == "read-write");
    CHECK(std::string(path_again) == root);
  }
  const auto before = fatpack::cache_stats();
  c->store(key_for(4242), fatpack::core::byte_span(cubin90()));
  fatpack_cache_stats cs = FATPACK_CACHE_STATS_INIT;
  CHECK(cs.struct_size == sizeof(fatpack_cache_stats));
  REQUIRE(fatpack_get_cache_stats(&cs) == FATPACK_OK);
  CHECK(cs.struct_size == sizeof(fatpack_cache_stats));  // read, never written
  CHECK(cs.stores == before.stores + 1);
  CHECK(cs.bytes_written > before.bytes_written);
  CHECK(fatpack_get_cache_stats(nullptr) == FATPACK_ERROR_INVALID_ARGUMENT);
  // Versioned struct: too small is refused and nothing is written; larger (a newer header's struct)
  // gets the fields this library knows and the rest is left alone.
  for (std::size_t small : {std::size_t{0}, sizeof(std::size_t), sizeof(fatpack_cache_stats) - 1}) {
    fatpack_cache_stats t = FATPACK_CACHE_STATS_INIT;
    t.struct_size = small;
    t.stores = 777;
    CHECK(fatpack_get_cache_stats(&t) == FATPACK_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(fatpack_last_error()).find("struct_size") != std::string::npos);
    CHECK(t.stores == 777);
    CHECK(t.struct_size == small);
  }
  struct newer {
    fatpack_cache_stats s;
    std::uint64_t added_later;
  } big{};
  big.s.struct_size = sizeof big;
  big.added_later = 0x5a5a5a5a;
  REQUIRE(fatpack_get_cache_stats(&big.s) == FATPACK_OK);
  CHECK(big.s.struct_size == sizeof big);
  CHECK(big.s.stores == cs.stores);
  CHECK(big.added_later == 0x5a5a5a5a);
  const std::string pre = fresh("api-pre");
  REQUIRE(make_dirs(posix_fs(), pre + "/v1", 0700) == 0);
  CHECK(fatpack::add_prebuilt_cache(pre).ok());
  CHECK(fatpack::cache_status().prebuilt == std::vector<std::string>{pre});
  CHECK(fatpack_cache_wait_refresh() == FATPACK_OK);
  set_sass_cache(nullptr);
  CHECK(fatpack::cache_status().mode == fatpack::cache_mode::disabled);
}

TEST_CASE("threads: 8 threads storing and finding 40 keys at once in one cache, with eviction") {
  const std::string root = fresh("threads");
  config cfg = cfg_for(root);
  cfg.max_bytes = 30 * 1024;  // about half of the working set: evictions while others read
  auto c = disk_cache::create(cfg);
  std::atomic<int> wrong{0}, hits{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (int i = 0; i < 40; ++i) {
          const jit_key k = key_for(7000 + static_cast<std::uint64_t>((i + t * 5) % 40));
          auto g = c->begin_compile(k);
          if (auto h = c->find(k, false)) {
            ++hits;
            if (h->sass != cubin90()) ++wrong;
            continue;
          }
          c->store(k, fatpack::core::byte_span(cubin90()));
        }
    });
  }
  for (auto& th : ts) th.join();
  CHECK(wrong == 0);
  CHECK(hits > 0);
  CHECK(c->mode() == fatpack::cache_mode::read_write);
  auto a = admin::open(root, true);
  REQUIRE(a.has_value());
  for (const auto& p : (*a)->verify(false)) CHECK_MESSAGE(p.file.find("index.v1") != std::string::npos, p.problem);
  CHECK((*a)->stats().bytes <= cfg.max_bytes + 2000);
}

TEST_CASE("clock skew -1 year .. +3 days: hits, LRU order and temp-file cleaning stay right") {
  const std::string root = fresh("skew");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  faulty_fs f;
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  std::string why;
  const std::int64_t year = 365ll * 24 * 3600, days3 = 3ll * 24 * 3600;
  std::vector<full_key> keys;
  for (int i = 0; i < 4; ++i) {
    f.clock_offset_s = i % 2 ? days3 : -year;  // the clock jumps between stores
    keys.push_back(make_full_key(key_for(900 + i)));
    REQUIRE(d->write(keys.back(), fatpack::core::byte_span(cubin90()), why) == 0);
  }
  f.clock_offset_s = -year;
  REQUIRE(d->read_exact(keys[0], 90));  // used last, with the clock a year behind
  f.clock_offset_s = days3;
  const std::uint64_t one = d->index()->total_bytes() / 4;
  evict_to(*d, one * 2, true);
  CHECK(d->read_exact(keys[0], 90).has_value());  // the most recently used survives
  CHECK(d->read_exact(keys[3], 90).has_value());
  CHECK_FALSE(d->read_exact(keys[1], 90).has_value());
  CHECK_FALSE(d->read_exact(keys[2], 90).has_value());

  // Temp files: a live writer's (flock held) is never removed, even when the clock makes it look 3
  // days old (before: removed as "older than a day"); a dead one is removed even when the clock is a
  // year behind and its mtime lies in the future (before: never, so they piled up).
  const std::string fan = d->fanout_dir(keys[0].code.hash);
  const std::string dead = fan + "/.d.fpc.1.1.tmp", alive = fan + "/.a.fpc.1.2.tmp";
  REQUIRE(std::system(("touch -d '2 hours ago' '" + dead + "' '" + alive + "'").c_str()) == 0);
  int fd = ::open(alive.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(posix_fs().try_flock(fd) == 0);
  f.clock_offset_s = days3;
  clean_temp_files(*d, 24 * 3600);
  CHECK(exists(alive));
  f.clock_offset_s = -year;
  clean_temp_files(*d, 24 * 3600);
  CHECK_FALSE(exists(dead));
  CHECK(exists(alive));
  ::close(fd);
  clean_temp_files(*d, 24 * 3600);
  CHECK_FALSE(exists(alive));
}

namespace {

// A fresh per-user cache directory `name` holding one entry for `k` (and its index).
std::string cache_with_entry(const std::string& name, const full_key& k) {
  const std::string root = fresh(name);
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  auto w = cache_dir::open(root, true, 1ull << 30, "w", false);
  std::string why;
  REQUIRE_MESSAGE(w->write(k, fatpack::core::byte_span(cubin90()), why) == 0, why);
  REQUIRE(w->index());
  return root;
}

}  // namespace

TEST_CASE("a prebuilt layer's index is copied, not mapped: truncating it under a running process is no SIGBUS") {
  // Before: index.v1 of a prebuilt layer (someone else's file) was mapped MAP_SHARED; `cp` or a
  // truncate over it made the next lookup touch pages past the end of the file: SIGBUS.
  const full_key k = make_full_key(key_for(600));
  const std::string root = cache_with_entry("prebuilt-index", k);
  const std::string index_path = root + "/v1/index.v1";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto d = cache_dir::open(root, false, 0, "prebuilt " + root, true);
    auto idx = d->index(/*may_rebuild=*/false);
    if (!idx || !idx->find(k.code.hash, k.driver.hash, nullptr)) ::_exit(2);
    if (::truncate(index_path.c_str(), 0) != 0) ::_exit(3);  // rewritten in place by its owner
    bool ok = idx->find(k.code.hash, k.driver.hash, nullptr) && idx->find_code(k.code.hash).size() == 1 &&
              idx->live_slots().size() == 1 && idx->total_bytes() > 0;
    std::string from;
    ok = ok && d->read_other_driver(make_full_key(key_for(600, 90, 13010)), 90, from).has_value();
    ::_exit(ok ? 0 : 4);
  }
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  CHECK_FALSE(WIFSIGNALED(st));
  if (WIFSIGNALED(st)) MESSAGE("child killed by signal " << WTERMSIG(st));
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  // The per-user cache still maps its own index (created by rename, never truncated).
  auto own = cache_dir::open(root, true, 1ull << 30, "user", false);
  CHECK(own->index());  // the truncated file is rebuilt
}

TEST_CASE("a prebuilt layer's large entry is read, not mapped: `cp` over it under a running process is no SIGBUS") {
  // The per-user cache maps a large stored cubin (its files are only ever replaced by rename); a
  // prebuilt layer's files are someone else's, rewritten in place by `cp` (which truncates first):
  // a mapping of one would fault when the driver reads it.
  auto big = cubin90();
  big.resize(max_entry_front + 100 * 1024, 0);
  const full_key k = make_full_key(key_for(601));
  const std::string root = fresh("prebuilt-big");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  {
    auto w = cache_dir::open(root, true, 1ull << 30, "user", false, entry_codec::stored);
    std::string why;
    REQUIRE(w->write(k, fatpack::core::byte_span(big), why) == 0);
    auto own = w->read_exact(k, 90);
    REQUIRE(own.has_value());
    CHECK(own->mapped());  // the same file, as the per-user cache: mapped
  }
  REQUIRE(std::system(("chmod -R go-w '" + root + "'").c_str()) == 0);
  config cfg = cfg_for(fresh("prebuilt-big-user"));
  cfg.prebuilt = {root};
  auto c = disk_cache::create(cfg);
  const std::string path = cache_dir::open(root, false, 0, "probe", true)->entry_path(k);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto hit = c->find(key_for(601), false);
    if (!hit || hit->where.find("prebuilt") == std::string::npos) ::_exit(2);
    if (hit->sass.mapped()) ::_exit(3);
    if (::truncate(path.c_str(), 0) != 0) ::_exit(4);  // `cp` over it, as its owner would
    ::_exit(hit->sass == big ? 0 : 5);                // every byte read after the truncate
  }
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  CHECK_FALSE(WIFSIGNALED(st));
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

namespace {

// A second process that runs `hold` (take a lock), says so through a pipe, and keeps it until the
// parent closes its end (or dies). The kernel drops what it held when it exits.
struct holder_process {
  pid_t pid = -1;
  int to_child = -1;
  template <class F>
  explicit holder_process(F hold) {
    int ready[2], go[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(go) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(ready[0]);
      ::close(go[1]);
      const char ok = hold() ? 'y' : 'n';
      if (::write(ready[1], &ok, 1) != 1) ::_exit(3);
      char c;
      while (::read(go[0], &c, 1) > 0) {
      }
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(go[0]);
    to_child = go[1];
    char ok = 0;
    REQUIRE(::read(ready[0], &ok, 1) == 1);
    ::close(ready[0]);
    REQUIRE(ok == 'y');
  }
  ~holder_process() { release(); }
  void release() {
    if (pid < 0) return;
    ::close(to_child);
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
  }
};

void damage(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f);
  std::fseek(f, -3, SEEK_END);
  std::fputc(0xff, f);
  std::fclose(f);
}

}  // namespace

TEST_CASE("verify --repair takes the key lock (a busy key is skipped with a note); clear spares live writers' temp files") {
  // Before: verify --repair unlinked a bad entry without the key's lock (a writer could be renaming
  // a good one into place), and clear deleted the temp file a live writer was about to rename.
  const full_key k = make_full_key(key_for(700));
  const std::string root = cache_with_entry("repair-locks", k);
  std::string why;
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  damage(d->entry_path(k));
  auto a = admin::open(root, false);
  REQUIRE(a.has_value());
  {
    holder_process writer([&] { return key_lock::try_acquire(d->inflight_lock_path(), cache_dir::lock_hash(k)).release() != nullptr; });
    auto busy = (*a)->verify(true);
    bool noted = false;
    for (const auto& p : busy)
      if (p.file == d->entry_path(k)) noted = !p.removed && p.problem.find("another process holds its key") != std::string::npos;
    CHECK(noted);
    CHECK(exists(d->entry_path(k)));
  }
  bool removed = false;
  for (const auto& p : (*a)->verify(true)) removed |= p.file == d->entry_path(k) && p.removed;
  CHECK(removed);
  CHECK_FALSE(exists(d->entry_path(k)));
  // clear: a live writer's temp file (flock held by another process) survives, a dead one's does not.
  REQUIRE(d->write(k, fatpack::core::byte_span(cubin90()), why) == 0);
  const std::string fan = d->fanout_dir(k.code.hash);
  const std::string live = fan + "/." + k.file_name() + ".1.1.tmp", dead = fan + "/." + k.file_name() + ".1.2.tmp";
  fatpack_test::write_file(dead, std::vector<std::uint8_t>{1});
  {
    holder_process writer([&] {
      const int fd = ::open(live.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      return fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0;  // kept open until the child exits
    });
    REQUIRE((*a)->clear());
    CHECK(exists(live));
    CHECK_FALSE(exists(dead));
    CHECK_FALSE(exists(d->entry_path(k)));
  }
  REQUIRE((*a)->clear());
  CHECK_FALSE(exists(live));  // its writer is gone
}

TEST_CASE("index.lock / evict.lock exclude two copies of the runtime in one process (OFD locks, not fcntl)") {
  // Before: Boost's file_lock is a process-scoped fcntl lock, and two lock objects of one process
  // (two shared libraries, each with its own copy of the runtime) never exclude each other: both
  // could update the index at once.
  const std::string root = fresh("two-copies");
  REQUIRE(prepare_user_dir(root, false).access == dir_access::read_write);
  for (const char* name : {"index.lock", "evict.lock"}) {
    CAPTURE(name);
    const std::string path = root + "/v1/" + name;
    std::string why;
    auto mine = dir_lock::get(path, why);
    REQUIRE_MESSAGE(mine, why);
    auto other = dir_lock::open_unshared(path, why);  // the other copy's table
    REQUIRE_MESSAGE(other, why);
    REQUIRE(mine->lock(why));
    CHECK_FALSE(other->try_lock());
    // A blocking lock of the other copy waits until this one lets go.
    std::atomic<bool> got{false};
    std::thread t([&] {
      std::string w;
      if (other->lock(w)) {
        got = true;
        other->unlock();
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK_FALSE(got.load());  // never true while `mine` holds it, however slow this machine is
    mine->unlock();
    t.join();
    CHECK(got.load());
    CHECK(other->try_lock());
    CHECK_FALSE(mine->try_lock());
    other->unlock();
    CHECK(mine->try_lock());
    mine->unlock();
  }
}

TEST_CASE("a prebuilt layer's objects/<ab> directories are checked: symlinked or writable by others is refused") {
  // Before: only the root and v1/ were checked; lookups open objects/<ab>/<entry> by name, so a
  // symlinked or world-writable fan-out directory let someone else plant entries in the layer.
  const full_key k = make_full_key(key_for(800));
  const std::string root = cache_with_entry("prebuilt-fans", k);
  const std::string fan = root + "/v1/objects/" + fatpack::core::hex_bytes(k.code.hash.data(), 1);
  CHECK(check_prebuilt_dir(root).access == dir_access::read_only);
  REQUIRE(::chmod(fan.c_str(), 0777) == 0);
  dir_verdict v = check_prebuilt_dir(root);
  CHECK(v.access == dir_access::refused);
  CHECK(v.warning.find(fan) != std::string::npos);
  REQUIRE(::chmod(fan.c_str(), 0700) == 0);
  REQUIRE(::chmod((root + "/v1/objects").c_str(), 0757) == 0);
  CHECK(check_prebuilt_dir(root).access == dir_access::refused);
  REQUIRE(::chmod((root + "/v1/objects").c_str(), 0700) == 0);
  // A fan-out directory replaced by a symlink to a directory someone else controls.
  const std::string elsewhere = fresh("prebuilt-fans-elsewhere");
  REQUIRE(std::system(("mv '" + fan + "' '" + elsewhere + "/ab' && ln -s '" + elsewhere + "/ab' '" + fan + "'").c_str()) == 0);
  v = check_prebuilt_dir(root);
  CHECK(v.access == dir_access::refused);
  CHECK(v.warning.find(fan + " is a symbolic link: not followed") != std::string::npos);
  auto c = disk_cache::create(cfg_for(fresh("prebuilt-fans-user")));
  CHECK_FALSE(c->add_prebuilt(root).ok());
}

TEST_CASE("prune and index rebuilds keep the use order: an entry used recently outlives one created later, never used") {
  // Before: the rebuild (which prune runs first) ordered by file time, so the oldest file was the
  // first victim however recently it had been used.
  const full_key used = make_full_key(key_for(900)), unused = make_full_key(key_for(901));
  const std::string root = cache_with_entry("lru-rebuild", used);
  std::string why;
  auto d = cache_dir::open(root, true, 1ull << 30, "user", false);
  REQUIRE(d->write(unused, fatpack::core::byte_span(cubin90()), why) == 0);
  // The used entry's file is older (by a day, so that file times alone would pick it).
  REQUIRE(std::system(("touch -d '1 day ago' '" + d->entry_path(used) + "'").c_str()) == 0);
  REQUIRE(d->read_exact(used, 90).has_value());  // used now
  // A forced rebuild keeps the order.
  REQUIRE(d->rebuild_index(why, 0, true));
  {
    auto idx = d->index();
    index_slot a, b;
    REQUIRE(idx->find(used.code.hash, used.driver.hash, &a));
    REQUIRE(idx->find(unused.code.hash, unused.driver.hash, &b));
    CHECK(a.tick > b.tick);
  }
  // prune (which rebuilds first) to one entry evicts the unused one.
  auto adm = admin::open(root, false);
  REQUIRE(adm.has_value());
  const std::uint64_t one = (*adm)->stats().bytes / 2;
  prune_result pr = (*adm)->prune(one);
  CHECK(pr.removed == 1);
  CHECK(exists(d->entry_path(used)));
  CHECK_FALSE(exists(d->entry_path(unused)));
}

TEST_CASE("root with another user's HOME uses root's own home, never creates a root-owned cache in that HOME") {
  // Before: `sudo app` keeping HOME created ~user/.cache/fatpack owned by root (0700); the user's
  // own runs refused it (foreign owner) and were memory-only from then on.
  const std::string base = fresh("root-home");
  const std::string user_home = base + "/user", root_home = base + "/root";
  REQUIRE(::mkdir(user_home.c_str(), 0700) == 0);
  if (::geteuid() == 0) REQUIRE(::chown(user_home.c_str(), 65534, 65534) == 0);  // another user's home
  struct saved_env {
    std::map<std::string, std::string> kept;
    saved_env() {
      for (const char* n : {"HOME", "XDG_CACHE_HOME", "FATPACK_CACHE_PATH"})
        if (const char* v = std::getenv(n)) kept[n] = v;
    }
    ~saved_env() {
      for (const char* n : {"HOME", "XDG_CACHE_HOME", "FATPACK_CACHE_PATH"}) unsetenv(n);
      for (const auto& kv : kept) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    }
  } restore;
  unsetenv("FATPACK_CACHE_PATH");
  setenv("HOME", user_home.c_str(), 1);
  setenv("XDG_CACHE_HOME", (user_home + "/.cache").c_str(), 1);
  faulty_fs ffs;
  ffs.fake_home = root_home;
  ffs.fake_euid = 0;
  CHECK(default_user_dir() == root_home + "/.cache/fatpack");
  ffs.fake_home = user_home + "/";  // root's own home (spelt with a slash): $HOME is used as usual
  CHECK(default_user_dir() == user_home + "/.cache/fatpack");
  ffs.fake_home = root_home;
  ffs.fake_euid = 1000;  // not root: the user's HOME, as always
  CHECK(default_user_dir() == user_home + "/.cache/fatpack");
  ffs.fake_euid = 0;
  setenv("FATPACK_CACHE_PATH", (base + "/explicit").c_str(), 1);  // an explicit path is respected
  CHECK(default_user_dir() == base + "/explicit");
  unsetenv("FATPACK_CACHE_PATH");
  ffs.fake_home = "/";  // a root without a usable home of its own... still not the user's
  CHECK(default_user_dir().rfind(user_home, 0) != 0);
  CHECK_FALSE(exists(user_home + "/.cache"));
  // A HOME that root owns (a service's, a test's scratch home) is used as usual.
  const std::string scratch = base + "/scratch";
  REQUIRE(::mkdir(scratch.c_str(), 0700) == 0);
  if (::geteuid() == 0) {
    setenv("HOME", scratch.c_str(), 1);
    unsetenv("XDG_CACHE_HOME");
    CHECK(default_user_dir() == scratch + "/.cache/fatpack");
  }
}
