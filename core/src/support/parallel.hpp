// parallel_for on a small process-wide pool of worker threads, for decompressing the independent
// blocks of one entry on the start-up path.
//
// Why a persistent pool: starting and joining a thread costs 20-50 us, about what a 256 KiB LZ4
// block takes to decode, so threads started per call ate most of the gain on a 1 MB cubin.
//
// The caller always works too and takes every item no worker has claimed, so progress never depends
// on a worker existing: after fork() (no workers in the child) or when the pool cannot start a
// thread, the caller simply does all the work.
#pragma once

#include <cstddef>
#include <functional>

namespace fatpack::core::detail {

// Runs fn(i) for every i in [0, n), on up to `threads` threads including the caller; returns when all
// are done. fn must not throw.
void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& fn);

}  // namespace fatpack::core::detail
