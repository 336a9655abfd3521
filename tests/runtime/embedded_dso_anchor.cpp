// A function the test executable calls, so that the shared library holding an embedded package is
// really linked (with --as-needed a library nothing references is dropped) — as in a product, where
// the library is linked because the program uses it.
extern "C" __attribute__((visibility("default"))) int fatpack_test_dso_anchor(void) { return 42; }
