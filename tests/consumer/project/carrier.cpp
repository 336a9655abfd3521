// The carrier library's own code: it only has to exist (and be used by app) so the linker keeps the
// library; its kernels come from fatpack_add_kernels.
extern "C" int carrier_version() { return 1; }
