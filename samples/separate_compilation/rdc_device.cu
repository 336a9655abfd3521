// A __device__ function used from another file (rdc_kernel.cu): separate compilation.
__device__ float rdc_scale(float x) { return 2.0f * x + 1.0f; }
