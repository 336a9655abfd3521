// C = A * B for row-major float matrices whose sizes are multiples of the tile, one tile of C per
// block: each step stages a TILE x TILE tile of A and of B in shared memory and accumulates their
// product. The driver-API programs of this folder compile it into an nvcc fatbin and load that.
// extern "C" keeps the name unmangled for cuModuleGetFunction.
#define TILE 16

extern "C" __global__ void matrix_mul(float* c, const float* a, const float* b, int a_cols, int b_cols) {
  __shared__ float a_tile[TILE][TILE];
  __shared__ float b_tile[TILE][TILE];
  const int row = blockIdx.y * TILE + threadIdx.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  float sum = 0.0f;
  for (int k0 = 0; k0 < a_cols; k0 += TILE) {
    a_tile[threadIdx.y][threadIdx.x] = a[row * a_cols + k0 + threadIdx.x];
    b_tile[threadIdx.y][threadIdx.x] = b[(k0 + threadIdx.y) * b_cols + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) sum += a_tile[threadIdx.y][k] * b_tile[k][threadIdx.x];
    __syncthreads();
  }
  c[row * b_cols + col] = sum;
}
