#!/usr/bin/env bash
# CLI test cases for `fatpack` (run by CTest, one case per test):
#   cli_test.sh CASE FATPACK ARTIFACTS DATA WORKDIR SOURCE_DIR
# Exit 0 pass, 1 fail, 77 skipped (with a message saying why).
set -uo pipefail
case_name=$1 fatpack=$2 art=$3 data=$4 work=$5 src=$6
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }
# run EXPECTED_RC CMD...: runs CMD, captures stdout/stderr in out.txt/err.txt, checks the exit code.
run() {
  local want=$1; shift
  "$@" >out.txt 2>err.txt
  local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "--- stdout"; cat out.txt; echo "--- stderr"; cat err.txt
    fail "'$*' exited $rc, expected $want"
  fi
}
expect_in() { grep -qE -- "$2" "$1" || { echo "--- $1:"; cat "$1"; fail "$1 lacks /$2/"; }; }
json() { python3 -c "import json,sys; d=json.load(open('out.txt')); $1" || { cat out.txt; fail "json check: $1"; }; }

cubins=("$art/vadd.sm_75.cubin" "$art/vadd.sm_80.cubin" "$art/vadd.sm_90.cubin")
ptx="$art/vadd.compute_90.ptx"

# For the build_signal / build_stale / response_files / depfile_escapes cases: a stand-in for nvcc
# (`fatpack build --nvcc`) that answers fatpack's queries and "compiles" by copying the committed
# cubin of its -arch; with FAKE_NVCC_SLOW set it writes a file in $TMPDIR and starts a child (as nvcc
# does, and starts cicc and ptxas), records "its pid, its child's pid" in compiler.pids and waits.
make_fake_nvcc() {
  cat > fake-nvcc <<EOF
#!/usr/bin/env bash
case "\$1" in
--list-gpu-code) printf 'sm_75\nsm_90\n'; exit 0 ;;
--version) echo 'Cuda compilation tools, release 13.0, V13.0.48'; exit 0 ;;
esac
if [ -n "\${FAKE_NVCC_SLOW:-}" ]; then
  echo x > "\${TMPDIR:-/tmp}/tmpxft_fake_\$\$"  # as nvcc's own temporary files
  sleep 60 & echo "\$\$ \$!" >> "$work/compiler.pids"; wait; exit 1
fi
arch=sm_75
while [ \$# -gt 0 ]; do [ "\$1" = -o ] && out=\$2; case "\$1" in -arch=sm_*) arch=\${1#-arch=} ;; esac; shift; done
cp "$art/vadd.\$arch.cubin" "\$out"
EOF
  chmod +x fake-nvcc
  printf '__global__ void k() {}\n' > k.cu
}
# Starts `fatpack build` in the background (pid in $bpid) with the slow fake nvcc running two jobs,
# and returns once both compilers run. The signals are reset to their defaults first: a background
# job of a script ignores SIGINT.
start_slow_build() {
  rm -f compiler.pids
  FAKE_NVCC_SLOW=1 python3 -c 'import os, signal, sys
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE): signal.signal(s, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$fatpack" build --nvcc ./fake-nvcc -o slow.fpk --arch 75-real,90-real -j 2 k.cu \
    >out.txt 2>err.txt &
  bpid=$!
  for _ in $(seq 200); do
    [ -f compiler.pids ] && [ "$(wc -l <compiler.pids)" -ge 2 ] && return 0
    kill -0 "$bpid" 2>/dev/null || { cat err.txt; fail "fatpack build ended before its compilers ran"; }
    sleep 0.1
  done
  fail "the fake compilers did not start within 20 s"
}
# running PID: the process exists and is not a zombie.
running() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]; }
compilers_gone() {  # waits up to 5 s for every recorded compiler process to be gone
  local left
  for _ in $(seq 50); do
    left=""
    for p in $(cat compiler.pids); do running "$p" && left="$left $p"; done
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  echo "still running:$left" >&2
  return 1
}
kill_compilers() { for p in $(cat compiler.pids 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done; }

case "$case_name" in
cache_warm)
  # `fatpack warm` / `fatpack cache ...` against the fake driver (FATPACK_LIBCUDA, set by CTest): what
  # warm compiles is what a program then loads without a JIT (checked with the runtime probe).
  [ -n "${FATPACK_LIBCUDA:-}" ] && [ -n "${PROBE:-}" ] || fail "CTest must set FATPACK_LIBCUDA and PROBE"
  export FAKECUDA_DEVICES=90 FAKECUDA_JIT_LOG=$work/jit.log
  jits() { [ -f "$work/jit.log" ] && wc -l <"$work/jit.log" | tr -d ' ' || echo 0; }
  c=$work/cache
  run 0 "$fatpack" pack -o w.fpk --name w --module vadd "$art/vadd.sm_75.cubin" "$art/vadd.sm_80.cubin" \
    "$art/vadd.compute_80.ptx"
  # Kernel-granular JIT (the default): vadd.cu has two kernels that share nothing, so the runtime
  # compiles it in two pieces (docs/runtime.md), and warm compiles what a load would, piece by piece.
  pc=$work/pieces-cache
  run 0 "$fatpack" warm --path "$pc" w.fpk
  expect_in out.txt "^compiled +w/vadd for sm_90 in 2 pieces from compute_80"
  [ "$(jits)" = 2 ] || fail "warm ran $(jits) JITs, expected 2 (one per piece)"
  run 0 "$fatpack" warm --path "$pc" w.fpk
  expect_in out.txt "^already cached +w/vadd for sm_90 in 2 pieces"
  FATPACK_CACHE_PATH=$pc run 0 "$PROBE" --package w.fpk load vadd cache-wait
  expect_in out.txt "load vadd device=0 ok entry=2 target=compute_80"
  [ "$(jits)" = 2 ] || fail "the program JIT-ed although warm had filled the cache with the pieces ($(jits) JITs)"
  FAKECUDA_FAIL_JIT=1 run 1 "$fatpack" warm --path "$work/pieces-fail" w.fpk
  expect_in out.txt "^FAILED +w/vadd for sm_90 in 2 pieces: vadd piece [12] of 2 "
  rm -f "$work/jit.log"
  # The rest counts whole-module entries.
  export FATPACK_JIT_PIECES=off
  run 0 "$fatpack" warm --path "$c" w.fpk
  expect_in out.txt "^compiled +w/vadd for sm_90 from compute_80"
  expect_in out.txt "1 compiled .* 0 failed"
  [ "$(jits)" = 1 ] || fail "warm ran $(jits) JITs, expected 1"
  run 0 "$fatpack" warm --path "$c" w.fpk
  expect_in out.txt "^already cached +w/vadd for sm_90"
  [ "$(jits)" = 1 ] || fail "a second warm JIT-ed again ($(jits) JITs)"
  # A program with the warmed cache loads the PTX entry's SASS from it: no JIT.
  FATPACK_CACHE_PATH=$c run 0 "$PROBE" --package w.fpk load vadd
  expect_in out.txt "load vadd device=0 ok entry=2 target=compute_80"
  [ "$(jits)" = 1 ] || fail "the program JIT-ed although warm had filled the cache ($(jits) JITs)"
  # Cross-target: GPUs that are not in the machine. sm_86 has SASS (sm_80 runs on CC 8.6).
  run 0 "$fatpack" warm --path "$c" --target sm_86,sm_100 --target sm_120 w.fpk  # lists and repeats
  expect_in out.txt "^has SASS +w/vadd for sm_86: "
  expect_in out.txt "^compiled +w/vadd for sm_100"
  expect_in out.txt "^compiled +w/vadd for sm_120"
  run 0 "$fatpack" warm -q --path "$c" --target sm_100 w.fpk w.fpk  # one list per --target: then packages
  run 0 "$fatpack" cache stats --path "$c" --json
  json "assert d['schema_version'] == 1 and d['stats']['entries'] == 3, d"
  # The whole directory (issue 13): what du counts, measured here independently (lstat of everything
  # under the cache, symlinks not followed), and the small preallocated index (52 KiB, not 3 MiB).
  json "
import os
s = d['stats']; t = s['directory']; items = app = alloc = 0
for top, dirs, files in os.walk('$c'):
    for n in ([top] if top == '$c' else []) + [os.path.join(top, x) for x in dirs + files]:
        st = os.lstat(n); items += 1; app += st.st_size; alloc += st.st_blocks * 512
assert (t['items'], t['apparent_bytes'], t['allocated_bytes']) == (items, app, alloc), (t, items, app, alloc)
assert t['apparent_bytes'] >= s['bytes'] + s['index']['bytes'] > s['bytes'] > 0, s
assert s['index']['bytes'] <= 64 * 1024, s['index']
assert abs(t['apparent_per_cubin_byte'] - app / s['cubin_bytes']) < 1e-9, t
assert abs(t['allocated_per_cubin_byte'] - alloc / s['cubin_bytes']) < 1e-9, t
"
  run 0 "$fatpack" cache stats --path "$c"
  expect_in out.txt "^directory: +[0-9]+ files and directories, .* apparent, .* allocated \\([0-9.]+ and [0-9.]+ bytes per cubin byte\\)"
  run 0 "$fatpack" cache list --path "$c" --json
  json "assert sorted(e['sm'] for e in d['entries']) == [90, 100, 120], d"
  run 0 "$fatpack" cache list --path "$c"
  expect_in out.txt "^3 entries in "
  run 0 "$fatpack" cache verify --path "$c"
  expect_in out.txt ": ok \\(3 entries\\)"
  # A damaged entry: verify names it and fails; --repair removes it; the cache is sound again.
  run 0 "$fatpack" cache list --path "$c" --json
  victim=$(python3 -c "import json; print(json.load(open('out.txt'))['entries'][0]['file'])")
  python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=0xff; open(p,'wb').write(b)" "$victim"
  run 1 "$fatpack" cache verify --path "$c"
  expect_in err.txt "^fatpack: error: $victim: "
  run 0 "$fatpack" cache verify --path "$c" --repair
  expect_in err.txt "(removed)"
  run 0 "$fatpack" cache verify --path "$c"
  # An entry cut to 8 bytes (its head unreadable): list does not show it but names it on stderr and
  # in the JSON (before: it was silently missing).
  run 0 "$fatpack" cache list --path "$c" --json
  cut=$(python3 -c "import json; print(json.load(open('out.txt'))['entries'][0]['file'])")
  cp "$cut" whole-entry.fpc
  python3 -c "import sys; p=sys.argv[1]; b=open(p,'rb').read(); open(p,'wb').write(b[:8])" "$cut"
  run 0 "$fatpack" cache list --path "$c"
  expect_in out.txt "^1 entry in "
  expect_in err.txt "^fatpack: warning: $cut: .*not listed; fatpack cache verify --repair removes it\\)"
  run 0 "$fatpack" cache list --path "$c" --json
  json "assert len(d['entries']) == 1 and [u['file'] for u in d['unreadable']] == ['$cut'] and d['unreadable'][0]['problem'], d"
  cp whole-entry.fpc "$cut"
  run 0 "$fatpack" cache verify --path "$c"
  run 0 "$fatpack" cache stats --path "$c" --json
  json "assert d['stats']['entries'] == 2 and d['stats']['writable'], d"
  run 0 "$fatpack" cache stats --path "$c"
  ! grep -q "read-only" out.txt || fail "cache stats called a writable cache read-only"
  # Planted in objects/ (an attacker review): a symlink and a file where fan-out directories belong,
  # a directory of another name, a file of no entry name, an entry filed under another key's name.
  # Before, the symlink made list, stats and verify refuse the whole cache as a "prebuilt cache", and
  # the rest was listed as entries or left out without a word. Now list lists the one sound entry and
  # warns about each of the others; verify names each and fails; --repair removes all but the
  # directory (it says so, and fails), never what the link points to.
  run 0 "$fatpack" cache list --path "$c" --json
  read -r e0 e1 < <(python3 -c "import json; print(*[e['file'] for e in json.load(open('out.txt'))['entries']])")
  cp "$e1" second-entry.fpc
  cp "$e0" "$e1"
  mkdir -p "$work/elsewhere" && echo keep > "$work/elsewhere/keep"
  ln -s "$work/elsewhere" "$c/v1/objects/zz"
  echo x > "$c/v1/objects/ab"
  mkdir "$c/v1/objects/not-a-fan-out"
  # A fan-out directory others may write: reported, and nothing in it read or removed (its file
  # could be swapped for a symlink between the scan and the unlink).
  mkdir -m 0777 "$c/v1/objects/fe" && chmod 0777 "$c/v1/objects/fe" && echo keep > "$c/v1/objects/fe/junk"
  echo junk > "$(dirname "$e0")/junk"
  planted=("$c/v1/objects/zz" "$c/v1/objects/ab" "$c/v1/objects/not-a-fan-out" "$c/v1/objects/fe" "$(dirname "$e0")/junk" "$e1")
  run 0 "$fatpack" cache list --path "$c"
  expect_in out.txt "^1 entry in "
  for p in "${planted[@]}"; do expect_in err.txt "^fatpack: warning: $p: .*not listed"; done
  expect_in err.txt "zz: is a symbolic link: not followed"
  expect_in err.txt "$e1: entry holds another key than its file name says"
  run 0 "$fatpack" cache list --path "$c" --json
  json "assert len(d['entries']) == 1 and sorted(u['file'] for u in d['unreadable']) == sorted('''${planted[*]}'''.split()), d"
  run 0 "$fatpack" cache stats --path "$c"
  run 1 "$fatpack" cache verify --path "$c"
  for p in "${planted[@]}"; do expect_in err.txt "^fatpack: error: $p: "; done
  run 1 "$fatpack" cache verify --path "$c" --repair
  for p in "${planted[@]}"; do
    case "$p" in */not-a-fan-out | */fe) continue ;; esac
    expect_in err.txt "^fatpack: error: $p: .*\\(removed\\)"
    [ ! -e "$p" ] && [ ! -L "$p" ] || fail "verify --repair left $p"
  done
  expect_in err.txt "not-a-fan-out: .*not removed: a directory"
  expect_in err.txt "objects/fe: .*writable by group or others.*its files are neither read nor removed"
  [ -f "$c/v1/objects/fe/junk" ] || fail "verify --repair removed a file inside a fan-out directory others may write"
  [ -f "$work/elsewhere/keep" ] || fail "verify --repair removed what the planted link pointed to"
  rmdir "$c/v1/objects/not-a-fan-out"
  rm -r "$c/v1/objects/fe"
  run 0 "$fatpack" cache verify --path "$c"
  expect_in out.txt ": ok \\(1 entry\\)"
  cp second-entry.fpc "$e1"
  run 0 "$fatpack" cache verify --path "$c" --repair  # the index counts the restored entry again
  run 0 "$fatpack" cache stats --path "$c" --json
  json "assert d['stats']['entries'] == 2, d"
  run 0 "$fatpack" cache prune --path "$c" --max-size 1
  expect_in out.txt "removed 2 entries"
  run 0 "$fatpack" warm --path "$c" --target sm_100 w.fpk
  run 0 "$fatpack" cache clear --path "$c"
  expect_in out.txt "removed 1 entry \\("
  run 0 "$fatpack" cache stats --path "$c" --json
  json "assert d['stats']['entries'] == 0, d"
  # Refused fan-out directories (an attacker review): one others may write, one another user owns
  # (as root), and a file of no entry name in a sound one. list shows the one sound entry; stats
  # counts what list lists; clear and prune remove only entries of sound directories and say so;
  # verify --repair leaves no index mismatch behind. Before, clear and prune deleted every file in
  # them ("removed 3 entries" of a cache list showed 1 of), stats counted 3, and --repair rebuilt the
  # index with the entries verify had just refused, so verify reported the mismatch again for ever.
  r="$work/refused"
  run 0 "$fatpack" warm --path "$r" --target sm_90,sm_100,sm_120 w.fpk
  mapfile -t fans < <(cd "$r/v1/objects" && ls)
  [ ${#fans[@]} -eq 3 ] || fail "expected 3 fan-out directories, got ${fans[*]}"
  o="$r/v1/objects"
  chmod 0777 "$o/${fans[0]}" && echo keep > "$o/${fans[0]}/notes"
  [ "$(id -u)" = 0 ] && chown 65534 "$o/${fans[1]}" || chmod 0777 "$o/${fans[1]}"
  keep=("$o/${fans[0]}/notes" "$o/${fans[2]}/notes" "$o/${fans[0]}"/*.fpc "$o/${fans[1]}"/*.fpc)
  run 0 "$fatpack" cache list --path "$r"
  expect_in out.txt "^1 entry in "
  # Said of a directory without the --repair advice, which never removes one.
  expect_in err.txt "objects/${fans[0]}: .*neither read nor removed\) \(not listed\)$"
  run 0 "$fatpack" cache stats --path "$r" --json
  json "assert d['stats']['entries'] == 1, d"
  run 1 "$fatpack" cache verify --path "$r" --repair
  run 1 "$fatpack" cache verify --path "$r"
  ! grep -q "index lists" err.txt || { cat err.txt; fail "verify --repair left the index disagreeing with the directory"; }
  echo keep > "$o/${fans[2]}/notes"  # verify --repair removes such a file; prune and clear must not
  sound=$(ls "$o/${fans[2]}"/*.fpc) && cp "$sound" sound-entry.fpc
  run 0 "$fatpack" cache prune --path "$r" --max-size 1
  expect_in out.txt "removed 1 entry \\("
  cp sound-entry.fpc "$sound"
  run 0 "$fatpack" cache clear --path "$r"
  expect_in out.txt "removed 1 entry \\("
  for f in "${keep[@]}"; do [ -f "$f" ] || fail "prune or clear removed $f, in a refused directory or of no entry name"; done
  # A path with no cache: prune, clear and verify --repair say so and make nothing (before, a
  # mistyped path got a new empty cache and "removed 0 entries"); a file is not read as a cache.
  for cmd in "prune" "clear" "verify --repair"; do
    run 1 "$fatpack" cache $cmd --path "$work/no-cache-here"
    expect_in err.txt "no fatpack cache at $work/no-cache-here"
  done
  [ ! -e "$work/no-cache-here" ] || fail "a cache command made $work/no-cache-here"
  # Without --path, the per-user cache not made yet is an empty one: clearing it on a fresh machine
  # is no error.
  mkdir -p "$work/fresh-home"  # this user's (root takes only a HOME it owns)
  run 0 env -u FATPACK_CACHE_PATH -u XDG_CACHE_HOME HOME="$work/fresh-home" "$fatpack" cache clear
  expect_in out.txt "^$work/fresh-home/.cache/fatpack: removed 0 entries"
  run 1 "$fatpack" cache stats --path "$work/w.fpk"
  expect_in err.txt "is not a directory"
  # A --path that does not exist fails the commands that read too (before: an empty "(read-only)"
  # cache, exit 0); an empty --path (an unset variable) is refused, never the per-user cache (before,
  # `clear --path ""` cleared it).
  for cmd in stats list verify; do
    run 1 "$fatpack" cache $cmd --path "$work/no-cache-here"
    expect_in err.txt "no fatpack cache at $work/no-cache-here \\(no such directory\\)"
  done
  mkdir -p "$work/empty-path-home/.cache/fatpack/v1"
  for cmd in "cache clear" "cache prune" "cache stats" "cache list" "warm --target sm_120 w.fpk"; do
    run 2 env -u FATPACK_CACHE_PATH -u XDG_CACHE_HOME HOME="$work/empty-path-home" "$fatpack" $cmd --path ""
    expect_in err.txt "^fatpack: error: --path: is empty"
  done
  [ -d "$work/empty-path-home/.cache/fatpack/v1" ] || fail "a command given --path '' changed the per-user cache"
  # objects/ planted as a symlink: refused by the commands that write (before, the runtime wrote
  # through it and clear said "removed 0 entries").
  s="$work/objects-link" && mkdir -p "$work/objects-elsewhere"
  run 0 "$fatpack" warm --path "$s" --target sm_120 w.fpk
  rm -r "$s/v1/objects" && ln -s "$work/objects-elsewhere" "$s/v1/objects"
  run 1 "$fatpack" cache clear --path "$s"
  expect_in err.txt "objects is a symbolic link: not followed"
  # An entry moved into another fan-out directory: never looked for there, so not listed or counted
  # (before, list showed it as valid and stats and the index counted it for ever); --repair removes it.
  m="$work/misfiled"
  run 0 "$fatpack" warm --path "$m" --target sm_120 w.fpk
  e=$(ls "$m"/v1/objects/*/*.fpc) && fan=$(basename "$(dirname "$e")")
  other=$([ "$fan" = 00 ] && echo 01 || echo 00)
  mkdir -m 0700 "$m/v1/objects/$other" && mv "$e" "$m/v1/objects/$other/"
  run 0 "$fatpack" cache list --path "$m"
  expect_in out.txt "^0 entries in "
  expect_in err.txt "objects/$other/$(basename "$e"): an entry's name in fan-out directory $other, where it is never looked for"
  run 0 "$fatpack" cache stats --path "$m" --json
  json "assert d['stats']['entries'] == 0, d"
  run 1 "$fatpack" cache verify --path "$m"
  run 0 "$fatpack" cache verify --path "$m" --repair
  [ ! -e "$m/v1/objects/$other/$(basename "$e")" ] || fail "verify --repair left an entry in the wrong fan-out directory"
  # FATPACK_CACHE_CODEC: warm writes the entries the runtime would (flags bits 0-3 at offset 16: 0
  # stored, 1 LZ4); a value the runtime warns about is said here too, and the default used.
  codec_of() { python3 -c "import glob,struct,sys; print(' '.join(str(struct.unpack_from('<I', open(f,'rb').read(), 16)[0] & 15) for f in sorted(glob.glob(sys.argv[1] + '/v1/objects/*/*.fpc'))))" "$1"; }
  run 0 "$fatpack" warm --path "$work/codec-default" --target sm_100 w.fpk
  [ "$(codec_of "$work/codec-default")" = 0 ] || fail "warm wrote codec $(codec_of "$work/codec-default"), expected stored (0)"
  FATPACK_CACHE_CODEC=lz4 run 0 "$fatpack" warm --path "$work/codec-lz4" --target sm_100 w.fpk
  [ "$(codec_of "$work/codec-lz4")" = 1 ] || fail "FATPACK_CACHE_CODEC=lz4: warm wrote codec $(codec_of "$work/codec-lz4")"
  FATPACK_CACHE_CODEC=zstd run 0 "$fatpack" warm --path "$work/codec-zstd" --target sm_100 w.fpk
  expect_in err.txt "^fatpack: warning: FATPACK_CACHE_CODEC=zstd is neither none nor lz4; using none"
  [ "$(codec_of "$work/codec-zstd")" = 0 ] || fail "FATPACK_CACHE_CODEC=zstd: warm wrote codec $(codec_of "$work/codec-zstd")"
  run 0 "$fatpack" warm --help
  expect_in out.txt "FATPACK_CACHE_CODEC"
  # An entry whose key text (at the header size, offset 12) was replaced by terminal escapes (same
  # length: the header checksum does not cover the texts): list and verify print it with '?' for each control character.
  esc=$(ls "$work"/codec-default/v1/objects/*/*.fpc)
  python3 -c "import struct,sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); t=struct.unpack_from('<I', b, 12)[0]; b[t:t+20]=b'\x1b[2J\x1b[31mEVIL\rXXXXXX'; open(p,'wb').write(b)" "$esc"
  run 0 "$fatpack" cache list --path "$work/codec-default"
  expect_in err.txt "\?\[2J\?\[31mEVIL\?XXXXXX"  # filed under the old text's key: a warning now
  ! grep -q $'[\x1b\r]' out.txt err.txt || fail "cache list printed control characters from a key text"
  run 1 "$fatpack" cache verify --path "$work/codec-default"
  ! grep -q $'[\x1b\r]' err.txt || fail "cache verify printed control characters from a key text"
  # Names from a package and a cache path from outside reach the terminal with '?' for each control
  # character (before, warm and the cache commands printed them as they were).
  run 0 "$fatpack" pack -o esc.fpk --name $'n\e[31mX' --module $'m\e[2J' "$art/vadd.compute_80.ptx"
  escp=$work/$'c\e]0;T\a'
  run 0 "$fatpack" warm --path "$escp" --target sm_100 esc.fpk
  expect_in out.txt "^compiled +n\?\[31mX/m\?\[2J for sm_100"
  ! grep -q $'[\x1b\x07]' out.txt || fail "warm printed control characters from a package name or the cache path"
  run 0 "$fatpack" cache list --path "$escp"
  ! grep -q $'[\x1b\x07]' out.txt || fail "cache list printed control characters from the cache path"
  run 0 "$fatpack" plan --gpu sm_90 esc.fpk
  expect_in out.txt "^package 'n\?\[31mX', module 'm\?\[2J'"
  ! grep -q $'[\x1b\x07]' out.txt || fail "plan printed control characters from a package or module name"
  # Errors and warnings too, line by line (before: a file name or a key path from the environment
  # with escapes reached the terminal raw in an error).
  run 1 "$fatpack" verify $'no\e[2Jsuch.fpk'
  expect_in err.txt "^fatpack: error: no\?\[2Jsuch.fpk"
  FATPACK_CACHE_REMOTE_KEY=$'/no/\e]0;T\akey' run 1 "$fatpack" cache pull --path "$c" --remote http://127.0.0.1:9/x w.fpk
  expect_in err.txt "no/\?\]0;T\?key"
  ! grep -q $'[\x1b\x07]' err.txt || fail "an error printed control characters from a file name or the environment"
  # Errors: a bad target is a usage error; no driver and a failing JIT are failures that say why.
  run 2 "$fatpack" warm --path "$c" --target sm_9x w.fpk
  expect_in err.txt "fatpack: error: --target: .*sm_9x"
  run 2 "$fatpack" cache prune --path "$c" --max-size lots
  # 17179869184G is 2^64 bytes: it wrapped to 0 and the prune deleted everything. A usage error now.
  run 0 "$fatpack" warm --path "$c" --target sm_100 w.fpk
  run 2 "$fatpack" cache prune --path "$c" --max-size 17179869184G
  expect_in err.txt "is not a size"
  run 2 "$fatpack" cache prune --path "$c" --max-size 99999999999999999999
  run 0 "$fatpack" cache stats --path "$c" --json
  json "assert d['stats']['entries'] == 1, d"
  # A host object that embeds the package is warmed like the package itself.
  run 0 "$fatpack" embed -o w.S w.fpk
  cc -c w.S -o w.o || fail "cannot assemble the embedding of w.fpk"
  mkdir -p warm-tmp
  TMPDIR=$work/warm-tmp run 0 "$fatpack" warm --path "$work/from-object" --target sm_100 w.o
  expect_in out.txt "^compiled +w/vadd for sm_100"
  [ -z "$(ls -A warm-tmp)" ] || fail "warm left in TMPDIR: $(ls -A warm-tmp)"
  # ... and so is a static library holding that object: ar places a member at any even offset (here
  # 4 past an 8-aligned one, after a 3-byte member), the package is aligned within its member.
  printf abc > odd.txt && ar rc w.a odd.txt w.o || fail "cannot make the archive w.a"
  run 0 "$fatpack" inspect w.a
  expect_in out.txt "^w.a \\[package 0\\]: package 'w'"
  # A relative --path names a directory under the current one (the runtime itself wants absolute).
  run 0 "$fatpack" warm --path rel-cache --target sm_100 w.fpk
  run 0 "$fatpack" cache stats --path rel-cache --json
  json "assert d['stats']['path'] == '$work/rel-cache' and d['stats']['entries'] == 1, d"
  FATPACK_LIBCUDA=$work/no-such-libcuda.so run 1 "$fatpack" warm --path "$c" w.fpk
  expect_in err.txt "fatpack: error: .*no-such-libcuda.so"
  FAKECUDA_FAIL_JIT=1 run 1 "$fatpack" warm --path "$c" w.fpk
  expect_in out.txt "^FAILED +w/vadd for sm_90: "
  expect_in out.txt "1 failed"
  run 1 "$fatpack" warm --path "$c" no-such.fpk
  expect_in err.txt "fatpack: error: .*no-such.fpk"
  ;;
doctor)
  # `fatpack doctor PROGRAM` against the fake driver (FATPACK_LIBCUDA, set by CTest) with a sample
  # program that embeds a package: what each device loads, whether the cache has it, what would be
  # JIT-compiled; without a driver it says so and still reports the packages and the cache.
  [ -n "${FATPACK_LIBCUDA:-}" ] && [ -n "${PROBE:-}" ] || fail "CTest must set FATPACK_LIBCUDA and PROBE"
  export FAKECUDA_DEVICES=90,80 FATPACK_CACHE_PATH=$work/cache
  unset FATPACK_CACHE_PREBUILT_PATH FATPACK_CACHE_DISABLE FATPACK_CACHE_READONLY FATPACK_FORCE_PTX_JIT CUDA_FORCE_PTX_JIT CUDA_DISABLE_PTX_JIT
  run 0 "$fatpack" pack -o w.fpk --name w --module vadd "$art/vadd.sm_75.cubin" "$art/vadd.sm_80.cubin" "$art/vadd.compute_80.ptx"
  run 0 "$fatpack" embed -o w.S w.fpk
  printf 'int main(void) { return 0; }\n' > main.c
  cc main.c w.S -o app || fail "cannot link the sample program"
  run 0 "$fatpack" doctor app
  expect_in out.txt "^driver: +$FATPACK_LIBCUDA, CUDA 13.0 \\(JIT accepts PTX ISA <= 9.0\\)"
  expect_in out.txt "^device 0: .*CC 9.0 \\(sm_90\\)"
  expect_in out.txt "^device 1: .*CC 8.0 \\(sm_80\\)"
  expect_in out.txt "^cache: +read-write: $work/cache does not exist yet"
  expect_in out.txt "^package 'w' \\(app \\(embedded\\)\\): 3 entries: sm_75, sm_80, compute_80 \\(PTX ISA 9.0\\); module vadd"
  expect_in out.txt "^  device 0 \\(sm_90\\) w/vadd: compute_80 \\(PTX ISA 9.0\\) .*not in the cache: JIT at the first load \\(in 2 pieces\\) \\(culink\\)"
  expect_in out.txt "^  device 1 \\(sm_80\\) w/vadd: sm_80 \\(exact SASS for CC 8.0\\)$"
  expect_in out.txt "^summary: +1 SASS, 0 from the cache, 1 to JIT-compile, 0 with nothing that fits"
  [ ! -e "$work/cache" ] || fail "doctor created the cache directory"
  # The runtime agrees: a load on device 0 picks that entry and JIT-compiles it (into the cache), on
  # device 1 it loads sm_80; then doctor finds the SASS under the key the load stored it with.
  FAKECUDA_JIT_LOG=$work/jit.log run 0 "$PROBE" --package w.fpk --device 0 load vadd cache-wait
  expect_in out.txt "load vadd device=0 ok entry=2 target=compute_80"
  [ "$(wc -l < jit.log)" = 2 ] || fail "the load ran $(wc -l < jit.log) JITs, expected 2 (one per piece)"
  run 0 "$PROBE" --package w.fpk --device 1 load vadd
  expect_in out.txt "load vadd device=1 ok entry=1 target=sm_80"
  run 0 "$fatpack" doctor --json app
  json "m=[l for l in d['loads'] if l['device']==0][0]; assert m['jit'] and m['cache']=='hit' and m['cache_layer']=='user' and m['code_key'].startswith('v1|culink|'), m"
  json "m=[l for l in d['loads'] if l['device']==1][0]; assert not m['jit'] and m['loads']=='sm_80' and m['cache'] is None, m"
  json "assert d['driver']['loaded'] and d['driver']['version']=='13.0' and [v['device'] for v in d['devices']]==['sm_90','sm_80'], d"
  json "m=[l for l in d['loads'] if l['device']==0][0]; assert m['pieces']==2 and m['pieces_cached']==2, m"
  json "l=d['cache']['layers']; assert d['cache']['mode']=='read-write' and l[0]['role']=='user' and l[0]['entries']==2, l"
  # Another driver: the entry is used at once and re-JIT-ed in the background; a prebuilt layer is named.
  FAKECUDA_DRIVER_VERSION=13010 run 0 "$fatpack" doctor app
  expect_in out.txt "device 0 \\(sm_90\\) w/vadd: .*SASS of another driver in the cache \\(user\\)"
  FATPACK_CACHE_PATH=$work/empty FATPACK_CACHE_PREBUILT_PATH=$work/cache run 0 "$fatpack" doctor app
  expect_in out.txt "^  prebuilt $work/cache: present, 2 entries"
  expect_in out.txt "device 0 \\(sm_90\\) w/vadd: .*SASS in the cache \\(prebuilt $work/cache\\)"
  # Package and module names are outside input: shown with control bytes escaped, never as a
  # terminal escape sequence (before: ESC went to the terminal as is).
  run 0 "$fatpack" pack -o esc.fpk --name "$(printf 'p\033x')" --module "$(printf 'm\033y')" "$art/vadd.sm_80.cubin"
  run 1 "$fatpack" doctor esc.fpk  # nothing fits device 0 (sm_90)
  if grep -q "$(printf '\033')" out.txt; then fail "doctor printed an ESC byte: $(cat -v out.txt)"; fi
  expect_in out.txt "^package 'p\\\\x1bx' \\(esc.fpk\\): 1 entry: sm_80; module m\\\\x1by$"
  expect_in out.txt "device 1 \\(sm_80\\) p\\\\x1bx/m\\\\x1by: sm_80"
  FATPACK_CACHE_DISABLE=1 run 0 "$fatpack" doctor app
  expect_in out.txt "^cache: +disabled: FATPACK_CACHE_DISABLE is set"
  expect_in out.txt "JIT at every start"
  # The policy from the environment, as a load would take it.
  CUDA_DISABLE_PTX_JIT=1 run 1 "$fatpack" doctor app
  expect_in out.txt "^policy: +sass_only"
  expect_in out.txt "device 0 \\(sm_90\\) w/vadd: NOTHING FITS: "
  # No driver: said so; packages and cache are still reported.
  FATPACK_LIBCUDA=$work/no-such-libcuda.so run 0 "$fatpack" doctor app
  expect_in out.txt "^driver: +none: .*no-such-libcuda.so"
  expect_in out.txt "^  user +$work/cache: present, 2 entries"
  expect_in out.txt "^package 'w' "
  FATPACK_LIBCUDA=$work/no-such-libcuda.so run 0 "$fatpack" doctor --json
  json "assert not d['driver']['loaded'] and d['driver']['error'] and d['devices']==[] and d['loads']==[] and d['packages']==[], d"
  # A shared library that carries the same package: counted once, as the registry counts it; a
  # different package under the same name is refused as the registry refuses it.
  cc -shared -fPIC w.S -o libw.so || fail "cannot link the sample library"
  run 0 "$fatpack" doctor --json libw.so app
  json "assert [p['name'] for p in d['packages']]==['w'] and len(d['loads'])==2, d"
  run 0 "$fatpack" pack -o other-w.fpk --name w --module vadd "$art/vadd.sm_90.cubin"
  run 1 "$fatpack" doctor app other-w.fpk
  expect_in out.txt "^package refused: other-w.fpk.*a different package named 'w' is already registered"
  # A device with nothing that fits: exit 1, naming it.
  run 0 "$fatpack" pack -o old.fpk --name old "$art/vadd.sm_75.cubin"
  run 1 "$fatpack" doctor old.fpk
  expect_in out.txt "device 0 \\(sm_90\\) old/vadd: NOTHING FITS: no entry can run on CC 9.0"
  # Hostile programs: no package, a damaged one, garbage, a truncated program. Errors, never a crash.
  cc main.c -o plain || fail "cannot link a program without packages"
  run 1 "$fatpack" doctor plain
  expect_in err.txt "^fatpack: error: plain: not a fatpack package and embeds none"
  off=$(python3 -c "import sys; print(open(sys.argv[1], 'rb').read().find(bytes([0x89]) + b'FPK\\r\\n\\x1a\\n'))" app)
  [ "$off" -ge 0 ] || off=
  [ -n "$off" ] || fail "no package magic found in app"
  cp app damaged && printf '\xff\xff\xff\xff' | dd of=damaged bs=1 seek=$((off + 16)) conv=notrunc status=none
  run 1 "$fatpack" doctor damaged
  expect_in err.txt "^fatpack: error: damaged"
  head -c $((off + 100)) app > truncated
  "$fatpack" doctor truncated >out.txt 2>err.txt; rc=$?
  [ "$rc" = 1 ] || fail "doctor on a truncated program exited $rc: $(cat err.txt)"
  head -c 100000 /dev/urandom > garbage
  run 1 "$fatpack" doctor garbage
  FATPACK_MAX_INPUT_SIZE=1000 run 1 "$fatpack" doctor app
  expect_in err.txt "exceeds the input size limit of 1000 bytes"
  ;;
doctor_gpu)
  # `fatpack doctor` with the real driver (label gpu): it sees the GPUs, and what it predicts for a
  # forced-PTX load (a cache miss, then a hit under the real driver's identity) is what a load does.
  [ -n "${PROBE:-}" ] || fail "CTest must set PROBE"
  export FATPACK_CACHE_PATH=$work/cache
  unset FATPACK_CACHE_PREBUILT_PATH FATPACK_CACHE_DISABLE FATPACK_CACHE_READONLY FATPACK_FORCE_PTX_JIT CUDA_FORCE_PTX_JIT CUDA_DISABLE_PTX_JIT
  "$fatpack" doctor --json >out.txt 2>err.txt
  if ! python3 -c "import json; d=json.load(open('out.txt')); assert d['driver']['loaded'] and d['devices']" 2>/dev/null; then
    echo "SKIPPED: no CUDA driver or GPU here: $(python3 -c "import json; print(json.load(open('out.txt'))['driver']['error'])" 2>/dev/null || cat err.txt)"
    exit 77
  fi
  run 0 "$fatpack" pack -o g.fpk --name g --module vadd "$art/vadd.sm_90.cubin" "$art/vadd.compute_90.ptx"
  run 0 "$fatpack" doctor g.fpk
  cat out.txt
  run 0 "$fatpack" doctor --json g.fpk
  json "assert '|' in d['driver']['cache_identity'], d['driver']  # the real driver's build string"
  json "assert all(l['loads']=='sm_90' and not l['jit'] for l in d['loads'] if l['compute_capability']=='9.0'), d['loads']"
  CUDA_FORCE_PTX_JIT=1 run 0 "$fatpack" doctor --json g.fpk
  json "assert all(l['jit'] and l['cache']=='miss' for l in d['loads']), d['loads']"
  CUDA_FORCE_PTX_JIT=1 run 0 "$PROBE" --package g.fpk --device 0 load vadd
  expect_in out.txt "load vadd device=0 ok entry=1 target=compute_90 .*jit=1"
  CUDA_FORCE_PTX_JIT=1 run 0 "$fatpack" doctor --json g.fpk
  json "l=[x for x in d['loads'] if x['device']==0][0]; assert l['cache']=='hit' and l['cache_layer']=='user', l"
  ;;
help)
  run 0 "$fatpack" --help
  cp out.txt top-help.txt
  for c in build pack inspect verify extract plan embed export-fatbin cache warm doctor; do
    expect_in top-help.txt "^ *$c "
    run 0 "$fatpack" "$c" --help
    expect_in out.txt "Usage"
  done
  run 0 "$fatpack" --version
  expect_in out.txt "fatpack [0-9.]+ \(package format 1\.2\)"
  ;;
unknown_command)
  # An unknown command names the nearest one (a swap, a missing or an extra letter), else lists them.
  run 2 "$fatpack" buidl -o x.fpk k.cu
  expect_in err.txt "^fatpack: error: unknown command 'buidl'; did you mean 'build'\\?$"
  run 2 "$fatpack" inspec x.fpk
  expect_in err.txt "^fatpack: error: unknown command 'inspec'; did you mean 'inspect'\\?$"
  run 2 "$fatpack" packk
  expect_in err.txt "did you mean 'pack'\\?$"
  run 2 "$fatpack" frobnicate
  expect_in err.txt "^fatpack: error: unknown command 'frobnicate' \\(commands: build, pack, inspect, .*warm, doctor, link-lto, split-ptx\\)$"
  run 2 "$fatpack" x
  expect_in err.txt "unknown command 'x' \\(commands: "
  # The same for a command's own commands (before: "A subcommand is required").
  run 2 "$fatpack" cache lst
  expect_in err.txt "^fatpack: error: unknown cache command 'lst'; did you mean 'list'\\?$"
  expect_in err.txt "^Run 'fatpack cache --help' for usage"
  run 2 "$fatpack" cache bogus
  expect_in err.txt "^fatpack: error: unknown cache command 'bogus' \\(cache commands: stats, list, verify, prune, clear, push, pull\\)$"
  run 0 "$fatpack" --version
  # Counts agree with their noun (docs/cli.md "Conventions").
  run 0 "$fatpack" pack -v -o one.fpk "${cubins[0]}"
  expect_in out.txt "one.fpk: package '[^']+', 1 entry, "
  run 0 "$fatpack" verify one.fpk
  expect_in out.txt "one.fpk: ok \\(1 package, 1 entry\\)$"
  run 0 "$fatpack" inspect one.fpk
  expect_in out.txt ", 1 entry, "
  run 0 "$fatpack" pack -v -o two.fpk "${cubins[0]}" "${cubins[1]}"
  expect_in out.txt "two.fpk: package '[^']+', 2 entries, "
  ;;
usage)
  run 2 "$fatpack"
  run 2 "$fatpack" frobnicate
  run 2 "$fatpack" pack "${cubins[0]}"                 # no -o
  expect_in err.txt "^fatpack: error: .*output"
  run 2 "$fatpack" pack -o x.fpk --codec gzip "${cubins[0]}"
  run 2 "$fatpack" build -o x.fpk --arch 91-real "$src/tests/kernels/vadd.cu"
  expect_in err.txt "fatpack: error: --arch: architecture 91 .* not supported by this CUDA toolkit"
  run 2 "$fatpack" build -o x.fpk --arch "75-fake" "$src/tests/kernels/vadd.cu"
  expect_in err.txt "invalid architecture '75-fake'"
  run 0 "$fatpack" pack -o x.fpk "${cubins[0]}"
  run 2 "$fatpack" plan --gpu sm_90a x.fpk
  expect_in err.txt "fatpack: error: --gpu 'sm_90a'"
  run 2 "$fatpack" plan --driver thirteen x.fpk
  run 2 "$fatpack" embed -o x.txt x.fpk
  run 2 "$fatpack" extract --target sm_9x x.fpk
  # An empty name (an unset variable) is refused, not the default name (before, silently).
  for opt in --name --module; do
    run 2 "$fatpack" pack -o x.fpk "$opt" "" "${cubins[0]}"
    expect_in err.txt "^fatpack: error: $opt: is empty"
  done
  run 2 "$fatpack" build -o x.fpk --name "" --arch 90-real "$src/tests/kernels/vadd.cu"
  expect_in err.txt "^fatpack: error: --name: is empty"
  run 2 "$fatpack" embed -o x.cpp --symbol "" x.fpk
  expect_in err.txt "^fatpack: error: --symbol: is empty"
  # The output is an input (the file itself, another name of it, a link to it): refused, the input
  # untouched (before, pack -o x.cubin x.cubin replaced the cubin with the package made of it).
  cp "${cubins[0]}" in.cubin && ln -s in.cubin in-link.cubin && cp "$src/tests/kernels/vadd.cu" in.cu
  for o in in.cubin ./in.cubin in-link.cubin; do
    run 2 "$fatpack" pack -o "$o" "${cubins[1]}" in.cubin
    expect_in err.txt "^fatpack: error: -o $o is the input in.cubin: writing it would replace the input"
  done
  cmp -s in.cubin "${cubins[0]}" || fail "pack replaced its input"
  run 2 "$fatpack" build -o in.cu --arch 90-real in.cu
  expect_in err.txt "^fatpack: error: -o in.cu is the input in.cu"
  cmp -s in.cu "$src/tests/kernels/vadd.cu" || fail "build replaced its source"
  cp x.fpk x-keep.fpk
  run 2 "$fatpack" export-fatbin -o x.fpk x.fpk
  expect_in err.txt "^fatpack: error: -o x.fpk is the input x.fpk"
  cmp -s x.fpk x-keep.fpk || fail "export-fatbin replaced its input"
  run 2 "$fatpack" link-lto -o in.cubin --arch sm_90 in.cubin
  expect_in err.txt "^fatpack: error: -o in.cubin is the input in.cubin"
  # `--name=` with nothing after '=' (an unset variable): refused (before, CLI11 took the next input
  # as the name and packed the rest); --module "" of extract, plan and export-fatbin too.
  run 2 "$fatpack" pack -o y.fpk --name= "${cubins[0]}" "${cubins[1]}"
  expect_in err.txt "^fatpack: error: --name: is empty"
  [ ! -e y.fpk ] || fail "pack --name= wrote y.fpk"
  run 2 "$fatpack" extract -o xd --module "" x.fpk
  expect_in err.txt "^fatpack: error: --module: is empty"
  run 2 "$fatpack" plan --module "" x.fpk
  expect_in err.txt "^fatpack: error: --module: is empty"
  run 2 "$fatpack" export-fatbin -o x.fatbin --module "" x.fpk
  expect_in err.txt "^fatpack: error: --module: is empty"
  ;;
roundtrip)
  for codec in lz4 zstd none; do
    run 0 "$fatpack" pack -o "rt-$codec.fpk" --name rt --codec "$codec" "${cubins[@]}" "$ptx"
    run 0 "$fatpack" verify "rt-$codec.fpk"
    expect_in out.txt "rt-$codec.fpk: ok \(1 package, 4 entries\)"
    run 0 "$fatpack" inspect "rt-$codec.fpk"
    expect_in out.txt "package 'rt'"
    for t in sm_75 sm_80 sm_90 compute_90; do expect_in out.txt " $t +"; done
    rm -rf "x-$codec"
    run 0 "$fatpack" extract -o "x-$codec" "rt-$codec.fpk"
    for sm in 75 80 90; do
      cmp "x-$codec/vadd.sm_$sm.cubin" "$art/vadd.sm_$sm.cubin" || fail "sm_$sm cubin differs after $codec round trip"
    done
    cmp "x-$codec/vadd.compute_90.ptx" "$ptx" || fail "PTX differs after $codec round trip"
    run 0 "$fatpack" extract -o "one-$codec" --target sm_80 "rt-$codec.fpk"
    [ "$(ls "one-$codec")" = "vadd.sm_80.cubin" ] || fail "--target sm_80 extracted: $(ls "one-$codec")"
  done
  # zstd packages are smaller than lz4 ones, and both smaller than none.
  s() { stat -c %s "$1"; }
  [ "$(s rt-zstd.fpk)" -lt "$(s rt-lz4.fpk)" ] && [ "$(s rt-lz4.fpk)" -lt "$(s rt-none.fpk)" ] ||
    fail "sizes: zstd $(s rt-zstd.fpk) lz4 $(s rt-lz4.fpk) none $(s rt-none.fpk)"
  ;;
fatbin_import)
  for fb in vadd.fatbin vadd.compressed.fatbin; do
    run 0 "$fatpack" pack -o fb.fpk "$art/$fb"
    run 0 "$fatpack" inspect --json fb.fpk
    json "t=sorted(e['target'] for e in d['packages'][0]['entries']); assert t==['compute_90','sm_75','sm_80','sm_90'], t"
    json "assert all(set(e['kernels'])=={'vadd','saxpy'} for e in d['packages'][0]['entries'])"
    run 0 "$fatpack" extract -o "x-$fb" --target compute_90 fb.fpk
    # The PTX inside the fatbin is what nvcc -ptx writes, minified by fatbinary (comments and
    # indentation dropped): equal once both are normalized that way.
    norm() { sed -e 's|//.*$||' -e 's/^[[:space:]]*//' -e 's/[[:space:]]\+/ /g' "$1"; }
    [ "$(norm "x-$fb/vadd.compute_90.ptx")" = "$(norm "$ptx")" ] || fail "PTX imported from $fb differs from nvcc -ptx output"
  done
  ;;
build)
  # --arch is repeatable: two occurrences are one list.
  run 0 "$fatpack" build -o b.fpk --arch 75-real --arch 90 -j 2 "$src/tests/kernels/vadd.cu" -- -O3
  [ ! -s err.txt ] || fail "build printed on a non-terminal stderr: $(cat err.txt)"
  run 0 "$fatpack" inspect --json b.fpk
  json "t=[e['target'] for e in d['packages'][0]['entries']]; assert t==['sm_75','sm_90','compute_90'], t"
  json "assert all(e['toolkit']=='13.0' and e['module']=='vadd' for e in d['packages'][0]['entries'])"
  json "assert d['packages'][0]['name']=='b'"
  # nvcc's -MD for --depfile does not change the code: the same package bytes.
  run 0 "$fatpack" build -o b2.fpk --name b --depfile b2.d --arch 75-real,90 -j 2 "$src/tests/kernels/vadd.cu" -- -O3
  cmp -s b.fpk b2.fpk || fail "--depfile changed the package"
  # The same error for every architecture is printed once, naming them all (it was printed per job).
  printf 'extern "C" __global__ void broken( { }\n' > broken.cu
  run 1 "$fatpack" build -o broken.fpk --arch 75-real,90-real broken.cu
  expect_in err.txt "^fatpack: error: broken.cu: nvcc failed for sm_75 and sm_90 \\(exit [0-9]+, the same output for each"
  [ "$(grep -c 'errors\? detected in the compilation' err.txt)" = 1 ] || fail "nvcc's output was not printed once: $(cat err.txt)"
  [ "$(grep -c '^fatpack: error:' err.txt)" = 1 ] || fail "more than one error line: $(cat err.txt)"
  [ ! -e broken.fpk ] || fail "a failed build left broken.fpk behind"
  # Different errors per architecture are each printed once: an #error only for sm_75 makes its
  # output differ from sm_90's.
  printf '#if defined(__CUDA_ARCH__)\nstatic_assert(__CUDA_ARCH__ == 0, "arch is " "x");\n#if __CUDA_ARCH__ == 750\n#error seventy-five\n#endif\n#endif\n' > per_arch.cu
  run 1 "$fatpack" build -o per_arch.fpk --arch 75-real,90-real per_arch.cu
  expect_in err.txt "^fatpack: error: per_arch.cu: nvcc failed for sm_75 \\(exit"
  expect_in err.txt "^fatpack: error: per_arch.cu: nvcc failed for sm_90 \\(exit"
  # --depfile: Make syntax, the package depending on the source and every header nvcc read (for every
  # target), paths with spaces escaped; Make and Ninja rebuild when a header changes.
  mkdir -p "inc dir"
  printf '#pragma once\n#define K 2.0f\n' > "inc dir/my h.h"
  printf '#include "my h.h"\n__global__ void k(float* x) { x[0] = K; }\n' > "s p.cu"
  run 0 "$fatpack" build -o "o u t.fpk" --depfile "d e p.d" --arch 75-real "s p.cu" -- -I"inc dir"
  head -1 "d e p.d" | grep -qxF 'o\ u\ t.fpk: \' || fail "depfile target: $(head -1 "d e p.d")"
  grep -qxF '  s\ p.cu \' "d e p.d" || fail "depfile lacks the source: $(head -3 "d e p.d")"
  grep -qE '^  inc\\ dir/my\\ h\.h( \\)?$' "d e p.d" || fail "depfile lacks the header: $(tail -3 "d e p.d")"
  grep -qE 'cuda_runtime\.h' "d e p.d" || fail "depfile lacks the toolkit headers nvcc read"
  printf 'o\\ u\\ t.fpk:\n\t@echo REBUILT\ninclude d\\ e\\ p.d\n' > Makefile
  run 0 make -s
  [ ! -s out.txt ] || fail "make rebuilt with nothing changed: $(cat out.txt)"
  touch -d '-10 sec' "o u t.fpk" && touch "inc dir/my h.h"
  run 0 make -s
  expect_in out.txt "^REBUILT$"
  if command -v ninja >/dev/null; then
    printf 'rule b\n  command = touch "o u t.fpk"\n  depfile = d e p.d\n  deps = gcc\nbuild o$ u$ t.fpk: b\n' > build.ninja
    run 0 ninja
    run 0 ninja
    expect_in out.txt "no work to do"
    touch -d '+2 sec' "inc dir/my h.h"
    run 0 ninja
    expect_in out.txt "\\[1/1\\]"
  else
    echo "note: ninja not found: the Ninja part of the depfile check is not run"
  fi
  run 0 "$fatpack" build -o all.fpk --arch all-major --codec zstd "$src/tests/kernels/vadd.cu"
  run 0 "$fatpack" inspect --json all.fpk
  json "t=[e['target'] for e in d['packages'][0]['entries']]; assert t==['sm_75','sm_80','sm_90','sm_100','sm_110','sm_120','compute_120'], t"
  ;;
rdc)
  # Separate compilation with real nvcc: rdc_kernel.cu's kernel calls rdc_device.cu's __device__ function.
  k="$src/tests/kernels/rdc_kernel.cu" d="$src/tests/kernels/rdc_device.cu"
  run 0 "$fatpack" build -o r.fpk --arch 90 -j 2 "$k" "$d" -- -rdc=true -O3
  run 0 "$fatpack" inspect --json r.fpk
  json "e=d['packages'][0]['entries']; t=[(x['target'], x['link'] and (x['link']['part'], x['link']['parts'])) for x in e]; assert t==[('sm_90', None), ('compute_90', (0, 2)), ('compute_90', (1, 2))], t"
  json "e=d['packages'][0]['entries']; assert all(x['module']=='r' for x in e) and e[0]['kernels']==['rdc_saxpy'] and e[1]['kernels']==['rdc_saxpy'] and e[2]['kernels']==[], e"
  run 0 "$fatpack" inspect r.fpk
  expect_in out.txt "format 1\.1"
  expect_in out.txt "\[link part 2/2\]"
  run 0 "$fatpack" verify r.fpk
  run 0 "$fatpack" export-fatbin -o r.fatbin r.fpk
  expect_in err.txt "warning: r\.fpk: entry 2 \(compute_90, module 'r'\): part 2 of 2 of a link group \(relocatable PTX\), which a fatbin cannot hold, is not exported"
  run 0 "$fatpack" pack -o back.fpk r.fatbin
  run 0 "$fatpack" inspect --json back.fpk
  json "assert [x['target'] for x in d['packages'][0]['entries']]==['sm_90']"
  run 0 "$fatpack" plan --json --gpu sm_90 --gpu sm_100 r.fpk
  json "c=[(p['chosen']['target'], p['chosen']['link_parts'], len(p['candidates'])) for p in d['plans']]; assert c==[('sm_90',0,2),('compute_90',2,2)], c"
  run 0 "$fatpack" build -o named.fpk --arch 90-virtual --module kernels "$k" "$d" -- -dc
  run 0 "$fatpack" inspect --json named.fpk
  json "assert [x['module'] for x in d['packages'][0]['entries']]==['kernels', 'kernels']"
  run 2 "$fatpack" build -o x.fpk --arch 90-real --module m "$k"
  expect_in err.txt "--module needs -rdc=true"
  run 2 "$fatpack" build -o x.fpk --arch 90-real "$k" "$d" -- -dlto
  expect_in err.txt "-dlto after '--' needs -rdc=true"
  # -dlto: per PTX target an LTO-IR group (nvcc -ltoir -dlto) beside the PTX group, with its kernels;
  # the SASS is the device link. plan: LTO-IR with an nvJitLink that knows the CC, else the PTX.
  # The SASS: nvJitLink's -lto link of the sources' LTO-IR (the toolkit's library, as at run time).
  nvj="$(dirname "$(dirname "$(command -v nvcc)")")/lib64/libnvJitLink.so.13"
  FATPACK_NVJITLINK="$nvj" run 0 "$fatpack" build -v -o lto.fpk --arch 90 "$k" "$d" -- -rdc=true -dlto
  if [ -r "$nvj" ]; then
    expect_in out.txt "device link of module 'lto': sm_90 SASS linked by nvjitlink 13\.[0-9]+ -lto"
  else
    echo "skipped the build-time nvJitLink check: no $nvj"
  fi
  # link-lto, the same link as a command (the CMake macro's): the LTO-IR of both files, or the
  # fallback cubin with a warning, or an error without one.
  cp "$art/rdc_kernel.lto_90.ltoir" k1.ltoir && cp "$art/rdc_device.lto_90.ltoir" d1.ltoir
  FATPACK_NVJITLINK="$nvj" run 0 "$fatpack" link-lto -v -o kd.cubin --arch sm_90 k1.ltoir d1.ltoir -- -O3
  if [ -r "$nvj" ]; then
    expect_in out.txt "kd\.cubin: sm_90 SASS linked by nvjitlink 13\.[0-9]+ -lto"
    run 0 "$fatpack" pack -o kd.fpk kd.cubin
    run 0 "$fatpack" inspect --json kd.fpk
    json "e=d['packages'][0]['entries']; assert [(x['target'], x['kernels']) for x in e]==[('sm_90',['rdc_saxpy'])], e"
    FATPACK_NVJITLINK="$nvj" run 1 "$fatpack" link-lto -o k.cubin --arch sm_90 k1.ltoir
    expect_in err.txt "error: k\.cubin: JIT of k\.cubin \(sm_90\) .*nvJitLinkComplete"
  fi
  FATPACK_NVJITLINK=/nonexistent/libnvJitLink.so.13 run 0 "$fatpack" link-lto -o fb.cubin --arch sm_90 --fallback "$art/rdc.sm_90.cubin" k1.ltoir d1.ltoir
  expect_in err.txt "warning: fb\.cubin: sm_90 SASS without link-time optimisation \(.*rdc\.sm_90\.cubin\): cannot load nvJitLink"
  cmp fb.cubin "$art/rdc.sm_90.cubin" || fail "the fallback cubin was not copied"
  run 2 "$fatpack" link-lto -o x.cubin --arch compute_90 k1.ltoir
  expect_in err.txt "--arch: expected sm_XY"
  run 1 "$fatpack" link-lto -o x.cubin --arch sm_90 "$art/rdc_kernel.compute_90.rdc.ptx"
  expect_in err.txt "rdc_kernel\.compute_90\.rdc\.ptx: not LTO-IR"
  # Without nvJitLink: the nvcc -dlink SASS, with a warning.
  FATPACK_NVJITLINK=/nonexistent/libnvJitLink.so.13 run 0 "$fatpack" build -o lto_nolink.fpk --arch 90-real "$k" "$d" -- -rdc=true -dlto
  expect_in err.txt "warning: device link of module 'lto_nolink': sm_90 SASS without link-time optimisation \(nvcc -dlink\): cannot load nvJitLink /nonexistent/libnvJitLink.so.13"
  run 0 "$fatpack" inspect --json lto.fpk
  json "e=d['packages'][0]['entries']; t=[(x['target'], (x['link'] or {}).get('parts', 0)) for x in e]; assert t==[('sm_90',0),('compute_90',2),('compute_90',2),('lto_90',2),('lto_90',2)], t; assert e[3]['kernels']==e[1]['kernels'] and e[3]['kernels'], e"
  run 0 "$fatpack" verify lto.fpk
  run 0 "$fatpack" plan --gpu 90,100,130 --nvjitlink 13.0 --driver 13.0 lto.fpk
  expect_in out.txt "nvJitLink 13\.0, policy prefer_sass"
  expect_in out.txt "chosen    entry 3   lto_90 \[2 parts\] +lto_90 LTO-IR links for CC 10\.0 through nvJitLink 13\.0"
  expect_in out.txt "lto_90 LTO-IR: nvJitLink 13\.0 cannot link for CC 13\.0"
  expect_in out.txt "ranked below sm_90: SASS loads without a link, so it ranks before LTO-IR"
  run 0 "$fatpack" plan --gpu 100 lto.fpk
  expect_in out.txt "no nvJitLink \(LTO-IR refused; pass --nvjitlink 13\.0\)"
  expect_in out.txt "chosen    entry 1   compute_90"
  run 2 "$fatpack" plan --gpu 100 --nvjitlink 12.8 lto.fpk
  expect_in err.txt "nvJitLink 13\.0 or newer"
  # Without -rdc the kernel's call cannot be resolved: nvcc's own error.
  run 1 "$fatpack" build -o x.fpk --arch 90-real "$k"
  expect_in err.txt "nvcc failed for sm_90"
  # A relocatable cubin (not device-linked) is refused by pack, naming the file and the symbol.
  cp "$art/rdc_kernel.sm_90.rdc.cubin" k.cubin
  run 1 "$fatpack" pack -o x.fpk k.cubin
  expect_in err.txt "k\.cubin: relocatable cubin \(sm_90, nvcc -rdc=true/-dc output\) that was not device-linked; unresolved symbols: _Z9rdc_scalef"
  [ ! -e x.fpk ] || fail "a refused pack left x.fpk behind"
  # Relocatable PTX packed by hand: --link makes the group, without it two PTX of one module and
  # target are refused as duplicates.
  cp "$art/rdc_kernel.compute_90.rdc.ptx" k.ptx && cp "$art/rdc_device.compute_90.rdc.ptx" d.ptx
  run 0 "$fatpack" pack -o l.fpk --module m --link k.ptx d.ptx
  run 0 "$fatpack" inspect --json l.fpk
  json "assert [x['link'] for x in d['packages'][0]['entries']]==[{'part':0,'parts':2},{'part':1,'parts':2}]"
  run 1 "$fatpack" pack -o l2.fpk --module m k.ptx d.ptx
  expect_in err.txt "already has an entry for compute_90"
  run 0 "$fatpack" extract -o ex l.fpk
  [ -s ex/m.compute_90.part0.ptx ] && [ -s ex/m.compute_90.part1.ptx ] || { ls ex; fail "extract did not name the parts"; }
  # LTO-IR (nvcc -ltoir -dlto) packed by hand, as the CMake macro does: STEM.lto_90.ltoir takes its
  # target from its name and its kernels from STEM.compute_90.ptx among the inputs.
  cp "$art/rdc_kernel.lto_90.ltoir" k.lto_90.ltoir && cp "$art/rdc_device.lto_90.ltoir" d.lto_90.ltoir
  cp k.ptx k.compute_90.ptx && cp d.ptx d.compute_90.ptx
  run 0 "$fatpack" pack -o lto2.fpk --module m --link k.compute_90.ptx d.compute_90.ptx k.lto_90.ltoir d.lto_90.ltoir
  run 0 "$fatpack" inspect --json lto2.fpk
  json "e=d['packages'][0]['entries']; assert [(x['target'], x['link']['part'], x['kernels']) for x in e]==[('compute_90',0,['rdc_saxpy']),('compute_90',1,[]),('lto_90',0,['rdc_saxpy']),('lto_90',1,[])], e"
  run 1 "$fatpack" pack -o x.fpk --module m k.lto_90.ltoir
  expect_in err.txt "k\.lto_90\.ltoir: LTO-IR \(nvcc -ltoir -dlto\) says neither its target nor its kernels: name it STEM\.lto_XY\.ltoir .*\(k\.compute_90\.ptx is not among the inputs\)"
  cp k.lto_90.ltoir k.ltoir
  run 1 "$fatpack" pack -o x.fpk k.ltoir k.compute_90.ptx
  expect_in err.txt "k\.ltoir: LTO-IR \(nvcc -ltoir -dlto\) says neither its target nor its kernels"
  ;;
jit_options)
  # The nvcc options the JIT needs are recorded on the PTX entries and reach the driver's JIT
  # (the fake driver logs the CUjit_option values it was given).
  run 0 "$fatpack" build -o o.fpk --arch 80-virtual "$src/tests/kernels/vadd.cu" -- \
    -maxrregcount=32 -lineinfo -Xptxas -O2,--warn-on-spills --use_fast_math
  expect_in err.txt "^fatpack: warning: o.fpk: .*vadd.cu \\(compute_80\\): ptxas options the JIT cannot apply .*: --warn-on-spills$"
  run 0 "$fatpack" inspect --json o.fpk
  json "o=d['packages'][0]['entries'][0]['options']; assert o=='-maxrregcount=32 --generate-line-info -O2 --warn-on-spills', o"
  run 0 "$fatpack" inspect o.fpk
  expect_in out.txt "^      options: -maxrregcount=32 --generate-line-info -O2 --warn-on-spills$"
  FAKECUDA_DEVICES=90 FAKECUDA_JIT_LOG=$work/jit.log FATPACK_CACHE_DISABLE=1 run 0 "$PROBE" --package o.fpk load vadd kernel vadd
  expect_in out.txt "load vadd device=0 ok entry=0 target=compute_80"
  expect_in jit.log " culink sm_90 [0-9a-f]{16} opts=O2,maxrregcount=32,lineinfo vadd piece 1 of 2 \\(kernel vadd\\): compute_80"
  # A bad value refuses the build before nvcc runs, and leaves no package.
  run 2 "$fatpack" build -o bad.fpk --arch 80-virtual "$src/tests/kernels/vadd.cu" -- -maxrregcount -5
  expect_in err.txt "^fatpack: error: nvcc options after '--': -maxrregcount=-5: not a register count \\(1\\.\\.255\\)"
  [ ! -e bad.fpk ] || fail "a refused build left bad.fpk behind"
  # nvcc's fatbins carry the options already: pack keeps them; a hostile value in one is refused.
  nvcc -fatbin -gencode arch=compute_80,code=compute_80 -maxrregcount=32 -lineinfo -Xptxas -v \
    -o o.fatbin "$src/tests/kernels/vadd.cu" || fail "nvcc -fatbin"
  run 0 "$fatpack" pack -o f.fpk o.fatbin
  [ ! -s err.txt ] || fail "pack warned about nvcc's own options: $(cat err.txt)"
  run 0 "$fatpack" inspect --json f.fpk
  json "o=d['packages'][0]['entries'][0]['options'].split(); assert sorted(o)==['--generate-line-info','-maxrregcount=32','-v'], o"
  # pack of PTX files records the options after '--' (what the CMake macro passes); fatbins keep theirs.
  run 0 "$fatpack" pack -o m.fpk --name m "$art/vadd.compute_90.ptx" o.fatbin -- -maxrregcount 64 -G -O3
  run 0 "$fatpack" inspect --json m.fpk
  json "o=[e['options'] for e in d['packages'][0]['entries']]; assert o[0]=='-maxrregcount=64 -g', o; assert '-maxrregcount=32' in o[1], o"
  run 2 "$fatpack" pack -o m.fpk "$art/vadd.compute_90.ptx" -- -Xptxas -O9
  expect_in err.txt "^fatpack: error: nvcc options after '--': -O9: not an optimization level \\(0\\.\\.4\\)"
  python3 - o.fatbin <<'PY' || fail "could not plant a bad value"
import sys; p = sys.argv[1]; b = open(p, 'rb').read()
assert b.count(b'-maxrregcount=32') == 1
open(p, 'wb').write(b.replace(b'-maxrregcount=32', b'-maxrregcount=-5'))
PY
  run 1 "$fatpack" pack -o g.fpk o.fatbin
  expect_in err.txt "^fatpack: error: g.fpk: o.fatbin: fatbin entry 0 .*: invalid ptxas options: -maxrregcount=-5: not a register count"
  [ ! -e g.fpk ] || fail "a refused pack left g.fpk behind"
  ;;
plan_require)
  # --require: a CI gate. Exit 1 naming the GPU, package, module and why when a listed GPU would get
  # nothing; 0 when each gets something; with --driver the PTX ISA limit counts.
  run 0 "$fatpack" pack -o r.fpk --name r "${cubins[0]}" "${cubins[2]}"
  run 0 "$fatpack" plan --require sm_75,sm_90 r.fpk
  expect_in out.txt "^--require: every module has code for sm_75, sm_90$"
  run 1 "$fatpack" plan --require sm_75 --require sm_80,sm_90 r.fpk
  expect_in err.txt "^fatpack: error: --require: sm_80 gets nothing from package 'r', module 'vadd': no entry can run on CC 8.0"
  [ "$(grep -c '^fatpack: error:' err.txt)" = 1 ] || fail "only sm_80 gets nothing: $(cat err.txt)"
  expect_in out.txt "^  sm_80 \\(CC 8.0\\):"  # the required GPUs are planned as with --gpu
  run 1 "$fatpack" plan --json --require sm_90,sm_120 r.fpk
  json "r=d['require']; assert r['ok'] is False and [m['device'] for m in r['missing']]==['sm_120'] and r['missing'][0]['module']=='vadd', r"
  # PTX for newer GPUs, but too new for a CUDA 12.4 driver.
  run 0 "$fatpack" pack -o rp.fpk --name rp "${cubins[2]}" "$art/vadd.compute_80.ptx"
  run 0 "$fatpack" plan --require sm_120 rp.fpk
  run 1 "$fatpack" plan --require sm_120 --driver 12.4 rp.fpk
  expect_in err.txt "sm_120 gets nothing from package 'rp'.*PTX ISA"
  run 1 "$fatpack" plan --require sm_120 --policy sass_only rp.fpk
  run 2 "$fatpack" plan --require sm_9x rp.fpk
  expect_in err.txt "^fatpack: error: --require 'sm_9x' is not a compute capability \\(not a number"  # was: --gpu 'sm_9x'
  # Numbers of the wrong length are said to be that (before: "not a number" for sm_0 and sm_99999).
  run 2 "$fatpack" plan --gpu sm_0 rp.fpk
  expect_in err.txt "'sm_0' is not a compute capability \\(2 to 4 digits: major and minor"
  run 2 "$fatpack" plan --gpu 99999 rp.fpk
  expect_in err.txt "'99999' is not a compute capability \\(2 to 4 digits"
  run 2 "$fatpack" plan --gpu 1234.5 rp.fpk
  expect_in err.txt "'1234.5' is not a compute capability \\(a major of 1 to 3 digits and a minor of 1 digit"
  run 2 "$fatpack" plan --require , rp.fpk
  # Names are outside input: the message shows control bytes escaped.
  run 0 "$fatpack" pack -o resc.fpk --name "$(printf 'p\033x')" --module "$(printf 'm\033y')" "${cubins[0]}"
  run 1 "$fatpack" plan --require sm_90 resc.fpk
  expect_in err.txt "gets nothing from package 'p\\\\x1bx', module 'm\\\\x1by'"
  if grep -q "$(printf '\033')" err.txt; then fail "plan printed an ESC byte: $(cat -v err.txt)"; fi
  # One list per occurrence: the file after a list is the file, wherever the list stands.
  run 0 "$fatpack" plan --json --require sm_90 rp.fpk
  json "assert d['require']['devices']==['sm_90'], d['require']"
  run 0 "$fatpack" plan --json --gpu sm_90 rp.fpk
  ;;
depfile_escapes)
  # --depfile with names Make must be told apart: a space, '#', '$' and a backslash. A stand-in nvcc
  # writes its -MF file as GCC escapes it; fatpack reads the names back and escapes them again; Make
  # then finds each file (a wrong escape names a file that does not exist: "No rule to make target").
  make_fake_nvcc
  names=("sp ace.h" "hash#.h" 'dollar$.h' 'back\slash.h')
  for n in "${names[@]}"; do echo x > "$n"; done
  cat > dep-nvcc <<'EOF2'
#!/usr/bin/env bash
case "$1" in --list-gpu-code|--version) exec ./fake-nvcc "$@" ;; esac
mf=""; args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" = -MF ] && mf=${args[i+1]}; done
[ -n "$mf" ] && printf '%s : k.cu \\\n  sp\\ ace.h hash\\#.h \\\n  dollar$$.h back\\slash.h\n' "out" > "$mf"
exec ./fake-nvcc "$@"
EOF2
  chmod +x dep-nvcc
  run 0 "$fatpack" build --nvcc ./dep-nvcc -o k.fpk --depfile k.d --arch 75-real,90-real k.cu
  cat k.d
  printf 'k.fpk:\n\t@echo REBUILT\ninclude k.d\n' > Makefile
  run 0 make -s
  [ ! -s out.txt ] || fail "make rebuilt with nothing changed: $(cat out.txt) $(cat err.txt)"
  for n in "${names[@]}"; do
    touch -d '-10 sec' k.fpk && touch "$n"
    run 0 make -s
    expect_in out.txt "^REBUILT$"
  done
  [ "$(grep -c 'sp\\ ace.h' k.d)" = 1 ] || fail "a prerequisite of both targets is not listed once: $(cat k.d)"
  ;;
response_files)
  # @FILE arguments: words separated by whitespace, quotes group, nested files expanded, a quoted @word
  # kept; missing files, unterminated quotes, self-inclusion and oversized files are usage errors.
  printf -- "-o 'with space.fpk'\n--name \"rsp name\"  @inner.rsp\n" > outer.rsp
  printf -- "--module vadd\t%s\n" "${cubins[0]}" > inner.rsp
  run 0 "$fatpack" pack @outer.rsp "${cubins[1]}"
  run 0 "$fatpack" inspect --json "with space.fpk"
  json "p=d['packages'][0]; assert p['name']=='rsp name' and [e['target'] for e in p['entries']]==['sm_75','sm_80'], p"
  printf -- "-o lit.fpk --name '@inner.rsp' %s\n" "${cubins[0]}" > literal.rsp
  run 0 "$fatpack" pack @literal.rsp
  run 0 "$fatpack" inspect --json lit.fpk
  json "assert d['packages'][0]['name']=='@inner.rsp', d"
  printf 'inspect lit.fpk\n' > cmd.rsp
  run 0 "$fatpack" @cmd.rsp
  expect_in out.txt "package '@inner.rsp'"
  run 2 "$fatpack" inspect @missing.rsp
  expect_in err.txt "^fatpack: error: response file @missing.rsp: cannot open: No such file or directory$"
  echo @self.rsp > self.rsp
  run 2 "$fatpack" inspect @self.rsp
  expect_in err.txt "^fatpack: error: @self.rsp: response files nest more than 8 deep"
  printf "inspect 'lit.fpk\n" > open.rsp
  run 2 "$fatpack" @open.rsp
  expect_in err.txt "^fatpack: error: response file @open.rsp: unterminated single quote at byte 8$"
  head -c 2000000 /dev/zero | tr '\0' ' ' > big.rsp
  run 2 "$fatpack" inspect @big.rsp
  expect_in err.txt "^fatpack: error: response file @big.rsp: its size \\(2000000 bytes\\) exceeds the response file size limit of 1048576 bytes"
  python3 -c "print('x ' * 100001)" > many.rsp
  run 2 "$fatpack" inspect @many.rsp
  expect_in err.txt "^fatpack: error: response file @many.rsp: the command line expands to more than 100000 arguments$"
  # Empty files named many times over: without a bound on the files read, @fan2.rsp reads empty.rsp
  # 2000 x 2000 times (it hung); the 1001st file read is refused.
  : > empty.rsp
  python3 -c "print('@empty.rsp ' * 2000)" > fan1.rsp
  python3 -c "print('@fan1.rsp ' * 2000)" > fan2.rsp
  run 2 timeout 20 "$fatpack" inspect @fan2.rsp
  expect_in err.txt "^fatpack: error: @empty.rsp: the command line reads more than 1000 response files, reached from response file @fan1.rsp$"
  printf 'a\0b' > nul.rsp
  run 2 "$fatpack" inspect @nul.rsp
  expect_in err.txt "NUL byte"
  run 2 "$fatpack" inspect @
  expect_in err.txt "'@' without a file name"
  mkdir adir
  run 2 "$fatpack" inspect @adir
  expect_in err.txt "^fatpack: error: response file @adir: is a directory$"
  run 2 timeout 20 "$fatpack" inspect @/dev/zero
  expect_in err.txt "exceeds the response file size limit"
  # After a bare --, words go to nvcc unchanged: @FILE is not expanded there.
  make_fake_nvcc
  printf '#!/usr/bin/env bash\nprintf "%%s\\n" "$@" >> "%s/nvcc.args"\nexec ./fake-nvcc "$@"\n' "$work" > logging-nvcc
  chmod +x logging-nvcc
  printf -- '--arch 75-real\n' > arch.rsp
  run 0 "$fatpack" build --nvcc ./logging-nvcc -o k.fpk @arch.rsp k.cu -- @not-expanded
  grep -qxF -- "-arch=sm_75" nvcc.args || fail "the --arch from arch.rsp did not reach nvcc: $(cat nvcc.args)"
  grep -qxF -- "@not-expanded" nvcc.args || fail "@not-expanded after -- was not passed on as is: $(cat nvcc.args)"
  ;;
plan)
  run 0 "$fatpack" pack -o p.fpk --name p "${cubins[@]}" "$art/vadd.compute_80.ptx"
  run 0 "$fatpack" plan --json --gpu sm_90,sm_86 --gpu sm_120 --gpu 20.0 p.fpk  # lists and repeats
  json "c=[(p['device'], p['chosen'] and p['chosen']['target']) for p in d['plans']]; assert c==[('sm_90','sm_90'),('sm_86','sm_80'),('sm_120','compute_80'),('sm_200','compute_80')], c"
  json "assert d['schema_version']==1 and all(len(p['candidates'])==4 for p in d['plans'])"
  json "assert all(c['verdict'] in ('chosen','usable','rejected') and c['reason'] for p in d['plans'] for c in p['candidates'])"
  # compute_80 from nvcc 13 has PTX ISA 9.0: a CUDA 12.4 driver cannot JIT it.
  run 0 "$fatpack" plan --json --gpu sm_120 --driver 12.4 p.fpk
  json "p=d['plans'][0]; assert p['chosen'] is None and 'nothing_fits' in p, p"
  run 0 "$fatpack" plan --json --gpu sm_90 --policy force_ptx p.fpk
  json "assert d['plans'][0]['chosen']['target']=='compute_80'"
  run 0 "$fatpack" plan --driver 13.0 p.fpk
  for g in sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 sm_121 sm_130 sm_200; do expect_in out.txt "^  $g "; done
  run 0 "$fatpack" plan --gpu sm_90 p.fpk
  expect_in out.txt "chosen +entry 2"
  expect_in out.txt "rejected +entry 0"
  ;;
embed)
  run 0 "$fatpack" pack -o e.fpk --name embedded_demo "${cubins[@]}"
  cat > main.cpp <<'CPP'
#include <cstdint>
#include <cstdio>
#include <cstring>
struct record { std::uint32_t magic, version; const char* name; const unsigned char *begin, *end; };
extern "C" const record __start_fatpack_registry[] __attribute__((weak, visibility("hidden")));
extern "C" const record __stop_fatpack_registry[] __attribute__((weak, visibility("hidden")));
static int registered = 0;
extern "C" void fatpack_register_embedded(const void*) { ++registered; }
int main() {
  int n = 0;
  for (const record* r = __start_fatpack_registry; r < __stop_fatpack_registry; ++r, ++n)
    std::printf("%s %x %u %zu %d\n", r->name, r->magic, r->version, std::size_t(r->end - r->begin),
                int(std::uintptr_t(r->begin) % 64));
  std::printf("records %d registered %d\n", n, registered);
}
CPP
  run 0 "$fatpack" embed -o e.cpp e.fpk
  run 0 g++ -std=c++17 -O2 -fPIE -pie -Wl,--gc-sections main.cpp e.cpp -o app
  run 0 ./app
  expect_in out.txt "^embedded_demo 52504b46 1 $(stat -c %s e.fpk) 0$"
  # No constructor registers it any more: the runtime finds the record through the note.
  expect_in out.txt "records 1 registered 0"
  run 0 readelf -nW app
  expect_in out.txt "^ *fatpack +0x00000008"
  # The tool finds the package inside the executable by its magic.
  run 0 "$fatpack" inspect app
  expect_in out.txt "package 'embedded_demo'"
  run 0 "$fatpack" verify app
  run 0 "$fatpack" extract -o fromapp --target sm_90 app
  cmp fromapp/vadd.sm_90.cubin "$art/vadd.sm_90.cubin" || fail "cubin extracted from the executable differs"
  # Assembler form.
  run 0 "$fatpack" embed -o e.S --symbol other e.fpk
  run 0 gcc -c e.S -o e_s.o
  run 0 g++ -std=c++17 main.cpp e_s.o -o app_s
  run 0 ./app_s
  expect_in out.txt "records 1 registered 0"
  run 0 readelf -nW app_s
  expect_in out.txt "^ *fatpack +0x00000008"
  # The generated file changes when the package changes (so dependent objects rebuild).
  cp e.cpp e.before.cpp
  run 0 "$fatpack" pack -o e.fpk --name embedded_demo "${cubins[0]}"
  run 0 "$fatpack" embed -o e.cpp e.fpk
  ! cmp -s e.cpp e.before.cpp || fail "embed output did not change with the package"
  # Different names that sanitize alike ("a-b" and "a.b", "ü" and "é") embed under different
  # symbols: one program links all four (before: a duplicate symbol).
  objs=()
  for n in a-b a.b ü é; do
    run 0 "$fatpack" pack -o "n$((${#objs[@]})).fpk" --name "$n" "${cubins[0]}"
    run 0 "$fatpack" embed -o "n${#objs[@]}.cpp" "n${#objs[@]}.fpk"
    objs+=("n${#objs[@]}.cpp")
  done
  run 0 g++ -std=c++17 main.cpp "${objs[@]}" -o app_names
  run 0 ./app_names
  expect_in out.txt "records 4 registered 0"
  # The generated file names its record symbol (what -Wl,-u needs); a --symbol given is used as it
  # is, so one that is no C identifier is refused rather than changed.
  grep -q "^// Record symbol: fatpack_pkg_a_b_[0-9a-f]\{8\}_record " n0.cpp || fail "n0.cpp does not name its record symbol"
  grep -q "Record symbol: fatpack_pkg_other_record " e.S || fail "e.S does not name its record symbol"
  run 2 "$fatpack" embed -o bad.cpp --symbol my-kernels n0.fpk
  expect_in err.txt "^fatpack: error: --symbol 'my-kernels' is not a C identifier"
  ;;
embed_hostile_name)
  # A package name is outside input. Before: embed wrote it raw into a // comment (a newline ended the
  # comment and the rest was compiled into the product), into a /* */ comment (`*/`), and into the
  # assembler string (a `"` or newline ended it; `)fatpack_asm"` ended the C++ raw string).
  evil=$'x\nint injected_from_name = 1; /* */ int injected_two = 2;\n)fatpack_asm" int injected_three = 3; //\\'
  run 0 "$fatpack" pack -o h.fpk --name "$evil" "${cubins[0]}"
  cat > main.cpp <<'CPP'
#include <cstdint>
#include <cstdio>
struct record { std::uint32_t magic, version; const char* name; const unsigned char *begin, *end; };
extern "C" const record __start_fatpack_registry[] __attribute__((weak, visibility("hidden")));
extern "C" const record __stop_fatpack_registry[] __attribute__((weak, visibility("hidden")));
extern "C" void fatpack_register_embedded(const void*) {}
int main() {
  for (const record* r = __start_fatpack_registry; r < __stop_fatpack_registry; ++r) {
    for (const char* c = r->name; *c; ++c) std::printf("%02x", static_cast<unsigned char>(*c));
    std::printf("\n");
  }
}
CPP
  want=$(printf '%s' "$evil" | od -An -tx1 | tr -d ' \n')
  for form in cpp S; do
    run 0 "$fatpack" embed -o "h.$form" --symbol hostile h.fpk
    run 0 g++ -std=c++17 -x "$( [ $form = cpp ] && echo c++ || echo assembler-with-cpp )" -c "h.$form" -o "h_$form.o"
    nm "h_$form.o" | grep -q injected && fail "$form: text of the package name was compiled: $(nm h_$form.o | grep injected)"
    run 0 g++ -std=c++17 main.cpp "h_$form.o" -o "app_$form"
    run 0 "./app_$form"
    expect_in out.txt "^$want\$"  # the record holds the name byte for byte
  done
  ;;
extract_hostile_name)
  # Module and package names are outside input. Before: extract joined them into output paths, so a
  # module named ../../x wrote outside -o DIR.
  mkdir -p deep/out
  run 0 "$fatpack" pack -o h.fpk --name ../../pkg --module ../../escaped "${cubins[0]}"
  run 0 "$fatpack" pack -o h2.fpk --name /tmp/abs --module /tmp/escaped_abs "${cubins[1]}"
  cat h.fpk h2.fpk > both.fpk
  run 0 "$fatpack" extract -o deep/out h.fpk
  run 0 "$fatpack" extract -o deep/out both.fpk
  [ -e escaped.sm_75.cubin ] || [ -e deep/escaped.sm_75.cubin ] && fail "extract wrote outside -o DIR"
  [ -e /tmp/escaped_abs.sm_80.cubin ] && fail "extract wrote to an absolute path from a module name"
  n=$(find deep/out -type f | wc -l)
  [ "$n" = 3 ] || { find deep; fail "expected 3 files in deep/out, found $n"; }
  find deep/out -type f -name '_*' | grep -q . || { find deep; fail "names were not made safe"; }
  for f in deep/out/*; do cmp -s "$f" "${cubins[0]}" || cmp -s "$f" "${cubins[1]}" || fail "$f is not a packed cubin"; done
  ;;
verify_malformed)
  n=0
  for f in "$data"/malformed/*.fpk; do
    n=$((n + 1))
    base=$(basename "$f")
    want=$(cat "${f%.fpk}.expect")
    run 1 "$fatpack" verify "$f"
    expect_in err.txt "^fatpack: error: $f.*$want"
    [ "$(wc -l < err.txt)" = 1 ] || fail "$base: expected a one-line error, got: $(cat err.txt)"
    # inspect reads the tables only: damage inside a payload shows when the entry is read.
    case "$base" in
      payload_checksum.fpk | bad_block_table.fpk | edited_plan.fpk) run 0 "$fatpack" inspect "$f" ;;
      *) run 1 "$fatpack" inspect "$f" && expect_in err.txt "^fatpack: error: $f.*$want" ;;
    esac
  done
  [ "$n" -ge 8 ] || fail "only $n malformed packages found in $data/malformed"
  # Inputs that are not nvcc output.
  : > empty.cubin
  run 1 "$fatpack" pack -o out.fpk empty.cubin
  expect_in err.txt "^fatpack: error: empty.cubin"
  for f in "$data"/inputs/*; do
    [ -e "$f" ] || continue
    run 1 "$fatpack" pack -o out.fpk "$f"
    expect_in err.txt "^fatpack: error: $f"
  done
  ;;
no_partial_output)
  head -c 300 "${cubins[2]}" > truncated.cubin
  run 1 "$fatpack" pack -o out.fpk "${cubins[0]}" truncated.cubin
  expect_in err.txt "^fatpack: error: truncated.cubin"
  [ ! -e out.fpk ] || fail "out.fpk left behind"
  [ -z "$(ls -A | grep -v -e truncated.cubin -e out.txt -e err.txt)" ] || fail "stray files: $(ls -A)"
  run 1 "$fatpack" pack -o /nonexistent-dir/out.fpk "${cubins[0]}"
  expect_in err.txt "^fatpack: error: /nonexistent-dir/out.fpk"
  ;;
unchanged_output)
  run 0 "$fatpack" pack -o u.fpk "${cubins[@]}"
  touch -d '2001-01-01' u.fpk
  run 0 "$fatpack" pack -o u.fpk "${cubins[@]}"
  [ "$(stat -c %Y u.fpk)" = "$(date -d 2001-01-01 +%s)" ] || fail "unchanged package was rewritten"
  run 0 "$fatpack" pack -o u.fpk "${cubins[@]:0:2}"
  [ "$(stat -c %Y u.fpk)" != "$(date -d 2001-01-01 +%s)" ] || fail "changed package was not rewritten"
  ;;
export_fatbin)
  run 0 "$fatpack" pack -o x.fpk "${cubins[@]}" "$ptx" "$art/vadd.sm_90a.cubin"
  run 0 "$fatpack" export-fatbin -o x.fatbin x.fpk
  # Re-import: the same targets come back.
  run 0 "$fatpack" pack -o back.fpk x.fatbin
  run 0 "$fatpack" inspect --json back.fpk
  json "t=sorted(e['target'] for e in d['packages'][0]['entries']); assert t==['compute_90','sm_75','sm_80','sm_90','sm_90a'], t"
  cuobjdump=$(command -v cuobjdump || python3 - <<'PY' 2>/dev/null
import glob, os, site
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for p in glob.glob(os.path.join(d, "nvidia", "**", "bin", "cuobjdump"), recursive=True):
        print(p); raise SystemExit
PY
)
  if [ -z "$cuobjdump" ]; then
    echo "SKIPPED: cuobjdump not found (pip install nvidia-cuda-cuobjdump); the re-import check passed"
    exit 77
  fi
  run 0 "$cuobjdump" --list-elf --list-ptx x.fatbin
  for sm in sm_75 sm_80 sm_90 sm_90a; do expect_in out.txt "ELF file +[0-9]+: .*\.$sm\.cubin"; done
  expect_in out.txt "PTX file +[0-9]+: .*\.sm_90\.ptx"
  ;;
inspect_json)
  run 0 "$fatpack" pack -o j.fpk --codec zstd --name jn "${cubins[2]}" "$ptx"
  # Levels and block sizes out of range are usage errors (before: a negative level or a block size
  # of 0 meant the default without a word; zstd --level -5 gave level 19).
  for bad in "--level -5" "--level 0" "--level 23" "--block-size 0" "--block-size 1073741825"; do
    run 2 "$fatpack" pack -o bad.fpk --codec zstd $bad "${cubins[2]}"
    [ ! -e bad.fpk ] || fail "pack $bad wrote a package"
  done
  expect_in err.txt "block-size"
  # Not numbers: said so (before: "Value 5abc not in range 1 to 22").
  for bad in "--level 5abc" "--block-size 1G"; do
    run 2 "$fatpack" pack -o bad.fpk --codec zstd $bad "${cubins[2]}"
    expect_in err.txt "'${bad#* }' is not a whole number"
  done
  run 1 "$fatpack" pack -o bad.fpk --codec lz4 --level 13 "${cubins[2]}"
  expect_in err.txt "lz4 level 13 is outside 1..12"
  run 0 "$fatpack" inspect --json j.fpk j.fpk
  json "assert d['schema_version']==1 and len(d['packages'])==2"
  # vadd.cu's PTX splits into 2 pieces: its plan makes the package format 1.2 (docs/format.md §4.2).
  json "p=d['packages'][0]; assert p['name']=='jn' and p['format_version']=='1.2'"
  json "e=d['packages'][0]['entries']; assert e[0]['pieces']==0 and e[1]['pieces']==2, e"
  json "e=d['packages'][0]['entries']; assert [x['kind'] for x in e]==['sass','ptx'] and e[1]['ptx_isa']=='9.0' and e[0]['ptx_isa'] is None"
  json "e=d['packages'][0]['entries'][0]; assert e['codec']=='zstd' and e['raw_size']==$(stat -c %s "${cubins[2]}") and e['stored_size']<e['raw_size'] and len(e['xxh3'])==16"
  ;;
split_ptx)
  # fatpack split-ptx on real nvcc PTX (tests/split/varied.cu): pieces listed and written, --json,
  # --groups, a module it does not split (-rdc) with the reason, usage errors.
  v=$art/split/varied.plain.sm_80.ptx
  run 0 "$fatpack" split-ptx "$v" -o pieces
  expect_in out.txt "12 pieces"
  expect_in out.txt "^  piece 0: [0-9]+ bytes, 1 kernel -> pieces/piece_0.ptx"
  expect_in out.txt "^    _Z7count_bPi"
  [ -f pieces/piece_11.ptx ] && [ ! -f pieces/piece_12.ptx ] || fail "split-ptx did not write 12 pieces"
  run 0 "$fatpack" split-ptx --json --groups 3 "$v"
  json "assert d['schema_version']==1 and d['split'] and d['unsplit_reason'] is None and len(d['pieces'])==3"
  json "assert sum(len(p['kernels']) for p in d['pieces'])==16 and all(p['path'] is None and p['bytes']>0 for p in d['pieces'])"
  run 0 "$fatpack" split-ptx --json "$art/split/varied.rdc.sm_80.ptx"
  json "assert not d['split'] and '-rdc' in d['unsplit_reason'] and len(d['pieces'])==1"
  run 2 "$fatpack" split-ptx --groups 0 "$v"
  run 2 "$fatpack" split-ptx --groups 2 --per-kernel "$v"
  printf 'not ptx' > junk.ptx
  run 1 "$fatpack" split-ptx junk.ptx
  expect_in err.txt "^fatpack: error: junk.ptx: "
  ;;
inspect_names)
  # Kernels with C++ names (tests/kernels/names.cu): the table shows them demangled (no return type,
  # "; " between kernels); --json keeps the symbols in "kernels" and adds c++filt's text.
  run 0 "$fatpack" pack -o n.fpk --name nm "$art/names.sm_90.cubin" "$art/names.compute_90.ptx"
  run 0 "$fatpack" inspect n.fpk
  expect_in out.txt 'mylib::affine<float, 256>\(float const\*, float\*, int\)'
  expect_in out.txt '; mylib::scale\(float\*, float\); '
  expect_in out.txt '\(anonymous namespace\)::hidden\(int\*\)'
  expect_in out.txt 'plain_c'
  if grep -q '_ZN5mylib' out.txt; then fail "the table shows mangled names"; fi
  run 0 "$fatpack" inspect --json n.fpk
  json "
for e in d['packages'][0]['entries']:
    k, m = e['kernels'], e['kernels_demangled']
    assert len(k) == len(m) == 10, e
    named = dict(zip(k, m))
    assert named['_ZN5mylib6affineIfLi256EEEvPKT_PS1_i'] == 'void mylib::affine<float, 256>(float const*, float*, int)', named
    assert named['_ZN5mylib5scaleEPdd'] == 'mylib::scale(double*, double)', named
    assert named['plain_c'] == 'plain_c', named"
  # A cubin's symbols (and the package and module names) are outside input: the table shows control
  # bytes escaped, never a terminal escape sequence (before: ESC [7m went to the terminal as is).
  python3 -c "import sys; b=open(sys.argv[1],'rb').read(); open('esc.cubin','wb').write(b.replace(b'vadd', b'v\x1b[7'))" "$art/vadd.sm_90.cubin"
  run 0 "$fatpack" pack -o esc.fpk --name "$(printf 'p\033x')" --module "$(printf 'm\033y')" esc.cubin
  run 0 "$fatpack" inspect esc.fpk
  if grep -q "$(printf '\033')" out.txt; then fail "inspect printed an ESC byte: $(cat -v out.txt)"; fi
  expect_in out.txt 'v\\x1b\[7'
  expect_in out.txt "package 'p\\\\x1bx'"
  ;;
json_non_utf8)
  # Names are outside input: invalid UTF-8 in a module or package name must not abort --json (nlohmann
  # throws on dump); each invalid byte becomes U+FFFD and the document stays valid JSON.
  run 0 "$fatpack" pack -o u.fpk --name $'pk\xfe' --module $'mod\xff' "${cubins[2]}"
  run 0 "$fatpack" inspect --json u.fpk
  json "p=d['packages'][0]; assert p['name']=='pk\ufffd' and p['entries'][0]['module']=='mod\ufffd', p"
  run 0 "$fatpack" plan --json --gpu sm_90 u.fpk
  json "p=d['plans'][0]; assert p['package']=='pk\ufffd' and p['module']=='mod\ufffd', p"
  ;;
input_size_limit)
  # Every input read is bounded: a huge sparse file fails at once (its size), /dev/zero (no size, no
  # end) at the limit; both name the file and the limit, and nothing aborts.
  truncate -s 1T sparse.fpk
  run 1 "$fatpack" inspect sparse.fpk
  expect_in err.txt "^fatpack: error: sparse.fpk: .*exceeds the input size limit of [0-9]+ bytes"
  rm -f sparse.fpk  # a 1 TiB file (sparse) left in the build tree breaks whoever copies it
  FATPACK_MAX_INPUT_SIZE=1048576 run 1 "$fatpack" verify /dev/zero
  expect_in err.txt "^fatpack: error: /dev/zero: .*exceeds the input size limit of 1048576 bytes"
  FATPACK_MAX_INPUT_SIZE=1048576 run 1 "$fatpack" pack -o z.fpk /dev/zero
  expect_in err.txt "^fatpack: error: /dev/zero: .*exceeds the input size limit of 1048576 bytes"
  # Below the limit everything still works.
  FATPACK_MAX_INPUT_SIZE=100000000 run 0 "$fatpack" pack -o ok.fpk "${cubins[2]}"
  FATPACK_MAX_INPUT_SIZE=100 run 1 "$fatpack" verify ok.fpk
  expect_in err.txt "^fatpack: error: ok.fpk: its size \\([0-9]+ bytes\\) exceeds the input size limit of 100 bytes"
  ;;
output_not_regular)
  # -o names something that is not a regular file. A private character device (a copy of /dev/null's
  # node made here, never the real one) is written to and stays a device; so does a FIFO (read by
  # a reader); a symlink keeps pointing at its file, which is replaced; /dev/stdout on a pipe
  # neither hangs nor is replaced; a directory is an error.
  if [ "$(id -u)" = 0 ] && mknod null c 1 3 2>/dev/null; then
    run 0 timeout 20 "$fatpack" pack -o null "${cubins[2]}"
    [ -c null ] || fail "-o null replaced the character device: $(stat -c %F null)"
  else
    echo "note: not root (or mknod refused): the device-node part is not run"
  fi
  mkfifo fifo
  timeout 20 cat fifo > from_fifo.fpk &
  reader=$!
  run 0 timeout 20 "$fatpack" pack -o fifo --name p "${cubins[2]}"
  wait $reader || fail "the FIFO reader failed"
  [ -p fifo ] || fail "-o fifo replaced the FIFO"
  run 0 "$fatpack" verify from_fifo.fpk
  run 0 "$fatpack" pack -o real.fpk "${cubins[1]}"
  ln -s real.fpk link.fpk
  run 0 "$fatpack" pack -o link.fpk "${cubins[2]}"
  [ -L link.fpk ] && [ "$(readlink link.fpk)" = real.fpk ] || fail "-o link.fpk replaced the symlink"
  run 0 "$fatpack" inspect --json real.fpk
  json "assert d['packages'][0]['entries'][0]['target']=='sm_90', d"
  timeout 20 "$fatpack" pack -o /dev/stdout --name p "${cubins[2]}" > piped.fpk 2>err.txt || fail "-o /dev/stdout failed or hung: $(cat err.txt)"
  run 0 "$fatpack" verify piped.fpk
  cmp -s piped.fpk from_fifo.fpk || fail "-o /dev/stdout wrote other bytes than -o fifo"
  mkdir adir
  run 1 "$fatpack" pack -o adir "${cubins[2]}"
  expect_in err.txt "^fatpack: error: adir: is a directory"
  ln -s missing.fpk dangling.fpk
  run 1 "$fatpack" pack -o dangling.fpk "${cubins[2]}"
  expect_in err.txt "^fatpack: error: dangling.fpk: is a symbolic link to a missing file"
  ;;
concatenation_one_walker)
  # verify and the runtime read concatenations with one walker and accept exactly the same files.
  run 0 "$fatpack" pack -o a.fpk --name a "${cubins[2]}"
  run 0 "$fatpack" pack -o b.fpk --name b --module other "${cubins[1]}"
  cat a.fpk b.fpk > ab.fpk
  # A damaged magic in the first package: refused by both (it used to pass verify as a "host binary").
  cp ab.fpk badmagic.fpk
  printf 'X' | dd of=badmagic.fpk bs=1 seek=1 conv=notrunc status=none
  run 1 "$fatpack" verify badmagic.fpk
  expect_in err.txt "^fatpack: error: badmagic.fpk: not a fatpack package"
  run 1 "$PROBE" --package badmagic.fpk load vadd
  # Trailing zero padding (what a linker or embedder adds): accepted by both.
  cp ab.fpk padded.fpk
  head -c 1000 /dev/zero >> padded.fpk
  run 0 "$fatpack" verify padded.fpk
  expect_in out.txt "padded.fpk: ok \\(2 packages, 2 entries\\)"
  run 0 "$PROBE" --package padded.fpk load vadd
  # Anything else after a package: refused by both.
  printf 'x' >> padded.fpk
  run 1 "$fatpack" verify padded.fpk
  run 1 "$PROBE" --package padded.fpk load vadd
  ;;
build_signal)
  # SIGTERM, SIGINT, SIGHUP, SIGPIPE while nvcc runs: fatpack stops the compilers (and what they
  # started), removes its temporary directory (with what the compilers wrote to their $TMPDIR) and
  # dies of the same signal. Before: it died at once, leaving the directory and the compilers
  # running (SIGTERM from kill reaches only fatpack).
  make_fake_nvcc
  export TMPDIR=$work/tmp
  mkdir -p "$TMPDIR"
  trap kill_compilers EXIT
  for sig in TERM INT HUP PIPE; do
    start_slow_build
    ls "$TMPDIR" | grep -q '^fatpack-build\.' || fail "no fatpack-build.* directory in TMPDIR while nvcc runs"
    kill -s "$sig" "$bpid"
    wait "$bpid" 2>/dev/null
    rc=$?
    want=$((128 + $(kill -l "$sig")))
    [ "$rc" = "$want" ] || { cat err.txt; fail "SIG$sig: fatpack build exited $rc, expected $want"; }
    [ -z "$(ls -A "$TMPDIR")" ] || fail "SIG$sig left in TMPDIR: $(ls -A "$TMPDIR")"
    compilers_gone || fail "SIG$sig left compiler processes running"
    [ ! -e slow.fpk ] || fail "SIG$sig: an interrupted build wrote slow.fpk"
    [ ! -s err.txt ] || fail "SIG$sig: fatpack printed: $(cat err.txt)"
  done
  # An ordinary build through the same fake compiler leaves nothing either.
  run 0 "$fatpack" build --nvcc ./fake-nvcc -o ok.fpk --arch 75-real k.cu
  [ -z "$(ls -A "$TMPDIR")" ] || fail "a finished build left in TMPDIR: $(ls -A "$TMPDIR")"
  ;;
build_stale)
  # SIGKILL cannot be caught: the next build in the same TMPDIR removes the directory of a build
  # whose process is gone, and leaves alone everything that is not exactly that.
  make_fake_nvcc
  export TMPDIR=$work/tmp
  mkdir -p "$TMPDIR" outside
  echo keep > outside/file
  trap kill_compilers EXIT
  start_slow_build
  kill -KILL "$bpid"
  wait "$bpid" 2>/dev/null
  rc=$?
  [ "$rc" = 137 ] || fail "SIGKILL: fatpack build exited $rc, expected 137"
  kill_compilers
  stale=$(ls -d "$TMPDIR/fatpack-build.$bpid".* 2>/dev/null)
  [ -n "$stale" ] && [ -d "$stale" ] || fail "no fatpack-build.$bpid.* directory after SIGKILL: $(ls -A "$TMPDIR")"
  # Links inside the stale tree: removing it deletes the links, never what they name.
  ln -s "$work/outside" "$stale/dirlink"
  mkdir -p "$stale/a/b" && ln -s "$work/outside/file" "$stale/a/b/filelink" && echo x > "$stale/a/b/f"
  # Left alone: a live pid's directory (this shell's), a link named like a stale directory (to a
  # directory with a file in it), a regular file so named, and names not exactly PREFIX.<pid>.XXXXXX.
  live="$TMPDIR/fatpack-build.$$.Live00"
  mkdir "$live" && echo x > "$live/f"
  link="$TMPDIR/fatpack-build.$bpid.Link00"
  ln -s "$work/outside" "$link"
  echo x > "$TMPDIR/fatpack-build.$bpid.File00"
  keep=("$live" "$link" "$TMPDIR/fatpack-build.$bpid.File00")
  for odd in "fatpack-build.0$bpid.abcdef" "fatpack-build.$bpid.abcdefg" "fatpack-build.$bpid.abc-ef" \
             "fatpack-build.$bpid" "fatpack-build.+$bpid.abcdef" "fatpack-build.99999999999.abcdef" \
             "xfatpack-build.$bpid.abcdef" "fatpack-warm.$bpid.abcdef"; do
    mkdir "$TMPDIR/$odd" && keep+=("$TMPDIR/$odd")
  done
  # Another user's directory named for a dead pid: only root can make one.
  other=""
  if [ "$(id -u)" = 0 ]; then
    other="$TMPDIR/fatpack-build.$bpid.Other0"
    mkdir "$other" && echo x > "$other/f" && chown -R 65534:65534 "$other"
    keep+=("$other")
  else
    echo "skipped: another user's stale-named directory (only root can create one)"
  fi
  run 0 "$fatpack" build --nvcc ./fake-nvcc -o ok.fpk --arch 75-real k.cu
  [ ! -e "$stale" ] || fail "the stale directory $stale is still there"
  for k in "${keep[@]}"; do [ -e "$k" ] || [ -L "$k" ] || fail "$k was removed"; done
  [ -f "$live/f" ] || fail "the live pid's file was removed"
  [ -L "$link" ] && [ -f "$link/file" ] || fail "the link named like a stale directory, or its target's file, was removed"
  [ -f outside/file ] || fail "a file outside TMPDIR was removed through a link"
  [ -z "$other" ] || [ -f "$other/f" ] || fail "another user's directory was emptied"
  for e in "$TMPDIR"/* "$TMPDIR"/.[!.]*; do
    [ -e "$e" ] || [ -L "$e" ] || continue
    printf '%s\n' "${keep[@]}" | grep -qxF -- "$e" || fail "left in TMPDIR besides the planted entries: $e"
  done
  ;;
*) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
