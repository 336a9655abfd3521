/* fatpack's version. Kept equal to `project(fatpack VERSION ...)` in the top CMakeLists.txt (the test
 * "version: the headers, the C and C++ functions and the CMake project agree" checks it).
 *
 * The macros are the version of the headers a program compiled against; fatpack_version() (C) and
 * fatpack::version() (C++) return the version of the runtime the program linked. */
#ifndef FATPACK_VERSION_H
#define FATPACK_VERSION_H

#define FATPACK_VERSION_MAJOR 0
#define FATPACK_VERSION_MINOR 1
#define FATPACK_VERSION_PATCH 0

/* MAJOR*10000 + MINOR*100 + PATCH: 100 for 0.1.0, 10203 for 1.2.3 (as fatpack_version() returns). */
#define FATPACK_VERSION_NUMBER (FATPACK_VERSION_MAJOR * 10000 + FATPACK_VERSION_MINOR * 100 + FATPACK_VERSION_PATCH)

#define FATPACK_VERSION_STR_(x) #x
#define FATPACK_VERSION_STR(x) FATPACK_VERSION_STR_(x)
/* "0.1.0" */
#define FATPACK_VERSION_STRING                                                                   \
  FATPACK_VERSION_STR(FATPACK_VERSION_MAJOR) "." FATPACK_VERSION_STR(FATPACK_VERSION_MINOR) "." \
  FATPACK_VERSION_STR(FATPACK_VERSION_PATCH)

#endif /* FATPACK_VERSION_H */
