// Separate compilation test (with rdc_kernel.cu): the device function the other file's kernel calls.
__device__ float rdc_scale(float x) { return 2.0f * x + 1.0f; }
