// Test-only LD_PRELOAD shim: the C library's processor count is 16 (std::thread::hardware_concurrency
// asks get_nprocs), so that a 2-core CI machine runs fatpack as a 16-core GPU host would.
int get_nprocs(void) { return 16; }
int get_nprocs_conf(void) { return 16; }
