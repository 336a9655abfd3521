// A value made once per process, without a lock held while it is made.
//
// Why not a function-local static or std::call_once: the values made this way (the CUDA driver,
// NVRTC, nvJitLink, the device list) are made by dlopen() and by the driver's cuInit, which take the
// dynamic loader's lock. A thread that already holds the loader's lock, a library's constructor that
// calls fatpack while dlopen() runs it, would wait for the static's guard, held by a thread that
// waits for the loader's lock: both wait for ever. Here nobody waits: threads that arrive before the
// value is published each make one, the first published is everyone's, and the others are dropped
// (what they loaded stays loaded, as the published one does; dlopen() counts references).
#pragma once

#include <atomic>

namespace fatpack::detail {

template <class T, class Make>
const T& load_once(std::atomic<const T*>& slot, Make&& make) {
  if (const T* published = slot.load(std::memory_order_acquire)) return *published;
  const T* mine = new T(make());  // never freed once published: used until exit
  const T* expected = nullptr;
  if (slot.compare_exchange_strong(expected, mine, std::memory_order_acq_rel, std::memory_order_acquire)) return *mine;
  delete mine;
  return *expected;
}

}  // namespace fatpack::detail
