// A blocked FP32 matmul template for CPU max-autotune: C = A * B, row-major.
// TILE blocks the three loops for cache reuse; UNROLL unrolls the innermost.
extern "C" void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  for (int i = 0; i < M * N; ++i)
    C[i] = 0.f;
  for (int i0 = 0; i0 < M; i0 += TILE)
    for (int k0 = 0; k0 < K; k0 += TILE)
      for (int j0 = 0; j0 < N; j0 += TILE)
        for (int i = i0; i < i0 + TILE && i < M; ++i)
          for (int k = k0; k < k0 + TILE && k < K; ++k) {
            const float a = A[i * K + k];
#pragma clang loop unroll_count(UNROLL)
            for (int j = j0; j < j0 + TILE && j < N; ++j)
              C[i * N + j] += a * B[k * N + j];
          }
}
