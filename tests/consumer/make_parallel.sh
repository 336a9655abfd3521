#!/bin/sh
# The make program of the Unix Makefiles consumer test: `ctest --build-and-test` runs make with no -j
# and MAKEFLAGS from the environment had no effect, so that build used one core of two (284 s against
# 158 s for the same work with Ninja). Runs make with CMAKE_BUILD_PARALLEL_LEVEL jobs (default 2).
exec make -j"${CMAKE_BUILD_PARALLEL_LEVEL:-2}" "$@"
