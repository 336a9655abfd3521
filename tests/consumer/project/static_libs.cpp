// The host code of the static libraries in CMakeLists.txt ("Static libraries"), one function per
// library, chosen by STATIC_PART. None of them refers to the library's kernels: the generated
// embedding object is an archive member nothing references, kept only by fatpack_add_kernels's
// link option.
#if STATIC_PART == 1
extern "C" int static_direct_version() { return 1; }
#elif STATIC_PART == 2
extern "C" int static_inner_version() { return 2; }
#elif STATIC_PART == 3
extern "C" int static_inner_version();
extern "C" int static_outer_version() { return static_inner_version() + 1; }
#elif STATIC_PART == 4
extern "C" int static_for_shared_version() { return 4; }
#elif STATIC_PART == 5
extern "C" int static_for_shared_version();
extern "C" __attribute__((visibility("default"))) int shared_from_static_version() {
  return static_for_shared_version() + 1;
}
#else
#error "STATIC_PART must be 1..5"
#endif
