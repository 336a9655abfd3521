#!/usr/bin/env bash
# Runs tests/cache/cache_security_test as an unprivileged user (issue 10). As root: creates the user
# `fatpack-sec` (useradd), a root-owned cache root for the foreign-owner case and a setuid-root copy
# of the probe for the AT_SECURE case (on a nosuid file system the test says it skipped and why),
# then runs the binary as that user with a 60 s bound. The test, the probe, the fake driver and the
# test artifacts are copied into a work directory of mode 0755 first: the build tree may sit under a directory that
# user cannot enter (a clone inside `mktemp -d`, mode 0700). Not root: runs it as the current user
# (it then skips the cases that need what only root can prepare).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
bin="$build/tests/cache/cache_security_test"
probe="$build/tests/runtime/fatpack_runtime_probe"
[ -x "$probe" ] || probe=$(find "$build" -name fatpack_runtime_probe -type f -perm -u+x | head -n1)
fake="$build/tests/runtime/fakecuda/libfakecuda.so"
if [ "$(id -u)" != 0 ]; then
  exec timeout 60 "$bin"
fi
user=fatpack-sec
id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
work=$(mktemp -d /tmp/fatpack-sec-XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir -p "$work/foreign/v1" && chmod 755 "$work/foreign" "$work/foreign/v1"
cp "$probe" "$work/probe-suid" && chown root:root "$work/probe-suid" && chmod 4755 "$work/probe-suid"
# What the test runs and reads, where that user can reach it (the test reads FATPACK_TEST_PROBE,
# FATPACK_TEST_FAKECUDA and FATPACK_TEST_ARTIFACTS; its temporary directories are under /tmp).
cp "$bin" "$work/cache_security_test" && cp "$probe" "$work/probe" && cp "$fake" "$work/libfakecuda.so"
cp -r "$build/tests/artifacts" "$work/artifacts"
chmod 755 "$work/cache_security_test" "$work/probe" && chmod 644 "$work/libfakecuda.so" && chmod -R a+rX "$work/artifacts"
echo "security tests as $user (uid $(id -u "$user")); probe $probe"
cd "$work"
timeout 60 runuser -u "$user" -- env FATPACK_SEC_FOREIGN_DIR="$work/foreign" \
  FATPACK_SEC_SETUID_PROBE="$work/probe-suid" FATPACK_TEST_PROBE="$work/probe" \
  FATPACK_TEST_FAKECUDA="$work/libfakecuda.so" FATPACK_TEST_ARTIFACTS="$work/artifacts" "$work/cache_security_test"
