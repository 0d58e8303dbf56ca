// A tiled matmul for autotune tests; each macro is a knob a search may turn.
// TILE=1 is the naive loop nest. UNROLL=3 does not compile (static_assert),
// BUG=1 computes the wrong thing and CRASH=1 traps: failing variants a search
// must record and survive.
#ifndef UNROLL
#define UNROLL 1
#endif
static_assert(UNROLL != 3, "UNROLL=3 is not supported");
extern "C" void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
#if CRASH
  __builtin_trap();
#endif
  for (int i = 0; i < M * N; ++i) C[i] = 0.f;
  for (int i0 = 0; i0 < M; i0 += TILE)
    for (int k0 = 0; k0 < K; k0 += TILE)
      for (int j0 = 0; j0 < N; j0 += TILE)
        for (int i = i0; i < i0 + TILE && i < M; ++i)
          for (int k = k0; k < k0 + TILE && k < K; ++k) {
            const float a = A[i * K + k];
#pragma clang loop unroll_count(UNROLL)
            for (int j = j0; j < j0 + TILE && j < N; ++j) C[i * N + j] += a * B[k * N + j];
          }
#if BUG
  C[0] += 1.f;
#endif
}
