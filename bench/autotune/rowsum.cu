// A row-sum template for max-autotune: Y[r] = sum of row r of the row-major
// M x N matrix X. Memory-bound, unlike the GEMM: one block of BLOCK threads
// per row, each thread loading VEC floats at a time (float2/float4 when VEC
// is 2/4; N % VEC == 0 keeps them aligned) with UNROLL independent loads in
// flight, then a warp-shuffle reduction and one across the block's warps.

extern "C" __global__ void __launch_bounds__(BLOCK)
    row_sum(const float* __restrict__ X, float* __restrict__ Y, int M, int N) {
  const int r = blockIdx.x;
  if (r >= M) {
    return;
  }
  const float* row = X + (size_t)r * N;
  float acc[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) acc[u] = 0.f;
  for (int c0 = threadIdx.x * VEC; c0 < N; c0 += BLOCK * VEC * UNROLL) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int c = c0 + u * BLOCK * VEC;
      if (c < N) {
#if VEC == 4
        const float4 v = *reinterpret_cast<const float4*>(row + c);
        acc[u] += (v.x + v.y) + (v.z + v.w);
#elif VEC == 2
        const float2 v = *reinterpret_cast<const float2*>(row + c);
        acc[u] += v.x + v.y;
#else
        acc[u] += row[c];
#endif
      }
    }
  }
  float s = 0.f;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) s += acc[u];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  __shared__ float warp_sums[BLOCK / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    warp_sums[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    s = lane < BLOCK / 32 ? warp_sums[lane] : 0.f;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) {
      Y[r] = s;
    }
  }
}
