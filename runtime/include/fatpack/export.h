/* FATPACK_API: marks the runtime's public entry points (fatpack.h, fatpack.hpp, error.hpp).
 *
 * The runtime and the core it contains are compiled with hidden visibility (-fvisibility=hidden,
 * -fvisibility-inlines-hidden): nothing else in the archive can ever be exported from a program or a
 * shared library. The public entry points get default visibility, so that
 *   - a program can export fatpack_register_embedded to the shared libraries whose embedded packages
 *     register with the program's runtime, and
 *   - a shared library that wants to export the API (a plugin host, FATPACK_EXPORT_API in
 *     docs/cmake.md) can.
 * A shared library that links fatpack::runtime exports none of fatpack's symbols by default all the
 * same: CMake links it with --exclude-libs for fatpack's archives (docs/runtime.md "Symbols").
 * Define FATPACK_API before including a fatpack header to override it. */
#ifndef FATPACK_EXPORT_H
#define FATPACK_EXPORT_H

#ifndef FATPACK_API
#  if defined(_WIN32) || defined(__CYGWIN__)
#    define FATPACK_API
#  elif defined(__GNUC__) || defined(__clang__)
#    define FATPACK_API __attribute__((visibility("default")))
#  else
#    define FATPACK_API
#  endif
#endif

/* The C++ headers declare their types between FATPACK_BEGIN_HIDDEN and FATPACK_END_HIDDEN: the
 * types are hidden, so what a library's own code instantiates over them (fatpack::result<module>,
 * std::variant<module, error>, ...) is not exported either; the entry points are FATPACK_API. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32) && !defined(__CYGWIN__)
#  define FATPACK_BEGIN_HIDDEN _Pragma("GCC visibility push(hidden)")
#  define FATPACK_END_HIDDEN _Pragma("GCC visibility pop")
#else
#  define FATPACK_BEGIN_HIDDEN
#  define FATPACK_END_HIDDEN
#endif

#endif /* FATPACK_EXPORT_H */
