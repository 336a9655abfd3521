// The static library's own (host) code: here only so the library has a source besides the package
// that fatpack_add_kernels adds to it.
int fatpack_sample_rdc_kernels_anchor() { return 0; }
