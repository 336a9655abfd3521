#!/bin/sh
# Runs redis_store_test's "hiredis absent" case with the hiredis library hidden: in a user and mount
# namespace of its own, /dev/null is mounted over the library, so dlopen() finds it and fails to load
# it, as on a machine without the package. Exit 77 (skipped) where user namespaces are not allowed.
# usage: without_hiredis.sh <path of libhiredis.so.N> <redis_store_test>
lib=$1 test=$2
if ! unshare -rm true 2>/dev/null; then
  echo "SKIPPED: no user namespaces here (unshare -rm), cannot hide $lib"
  exit 77
fi
exec unshare -rm sh -c 'mount --bind /dev/null "$1" && FATPACK_TEST_HIREDIS_ABSENT=1 exec "$2" -tc="hiredis absent*"' sh "$lib" "$test"
