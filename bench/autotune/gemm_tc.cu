// A bf16 tensor-core GEMM template for max-autotune (mma.sync, sm_80 and up;
// searched for sm_90a): C[M,N] = A[M,K] * B[N,K]^T with A and B row-major
// bf16 (B is N x K, nn.Linear's weight layout: "TN" in BLAS terms), fp32
// accumulation and C row-major bf16 (rounded to nearest even).
//
// A block computes a BM x BN tile of C through BK-deep slices; STAGES slices
// are in flight in shared memory, loaded with 16-byte cp.async. Each warp
// owns a WM x WN tile: (WM/16) x (WN/8) mma.sync.m16n8k16 tiles, fed by
// ldmatrix. Shared memory is XOR-swizzled in 16-byte chunks (bits 4-6 of a
// byte offset ^= bits 7-9, the 128-byte pattern), so ldmatrix's eight rows
// and cp.async's stores hit distinct banks. Blocks are ordered in groups of
// 8 row tiles so that neighbours share A and B in L2.
//
// Needs K % 8 == 0 and N % 8 == 0 (16-byte rows); M and N need not divide by
// the tile (out-of-range rows are zero-filled, their outputs not stored).
// Launch: grid ceil_div(M, BM) * ceil_div(N, BN), block THREADS, dynamic
// shared memory STAGES * (BM + BN) * BK * 2 bytes.

#define WARPS_M (BM / WM)
#define WARPS_N (BN / WN)
#define THREADS (WARPS_M * WARPS_N * 32)
#define MI (WM / 16)
#define NI (WN / 8)
#define ROW_BYTES (BK * 2)
#define A_BYTES (BM * ROW_BYTES)
#define STAGE_BYTES ((BM + BN) * ROW_BYTES)
#define GROUP_M 8

typedef unsigned short bf16_bits;

__device__ __forceinline__ unsigned swizzle(unsigned offset) {
  return offset ^ (((offset >> 7) & 7) << 4);
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool in_range) {
  // src-size 0 zero-fills the 16 bytes and reads nothing.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(in_range ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned out;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(out) : "f"(hi), "f"(lo));
  return out;
}

// ROWS x BK of a K-major matrix (rows_total x K) into swizzled shared memory.
template <int ROWS>
__device__ __forceinline__ void load_tile(unsigned smem, const bf16_bits* __restrict__ g,
                                          int rows_total, int row0, int K, int k0) {
  constexpr int kChunksPerRow = BK / 8;
  constexpr int kChunks = ROWS * kChunksPerRow;
#pragma unroll
  for (int step = 0; step < (kChunks + THREADS - 1) / THREADS; ++step) {
    const int i = step * THREADS + (int)threadIdx.x;
    if (kChunks % THREADS != 0 && i >= kChunks) break;
    const int r = i / kChunksPerRow, c = i % kChunksPerRow;
    const int gr = row0 + r, gk = k0 + c * 8;
    const bool in_range = gr < rows_total && gk < K;
    const bf16_bits* src = in_range ? g + (size_t)gr * K + gk : g;
    cp_async16(smem + swizzle(r * ROW_BYTES + c * 16), src, in_range);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS)
    gemm_bf16(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ B,
              bf16_bits* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned smem = (unsigned)__cvta_generic_to_shared(smem_raw);

  // Grouped ordering: GROUP_M row tiles sweep the column tiles together.
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (blockIdx.x / per_group) * GROUP_M;
  const int group_m = min(tiles_m - first_m, GROUP_M);
  const int bm = first_m + (blockIdx.x % per_group) % group_m;
  const int bn = (blockIdx.x % per_group) / group_m;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  const int k_tiles = (K + BK - 1) / BK;
  auto load_stage = [&](int stage, int kt) {
    const unsigned base = smem + stage * STAGE_BYTES;
    load_tile<BM>(base, A, M, bm * BM, K, kt * BK);
    load_tile<BN>(base + A_BYTES, B, N, bn * BN, K, kt * BK);
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    cp_async_commit(); // empty groups keep the count uniform
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<STAGES - 2>(); // this thread's copies of slice kt landed
    __syncthreads();             // everyone's, and slice kt-1 is no longer read
    const int next = kt + STAGES - 1;
    if (next < k_tiles) load_stage(next % STAGES, next);
    cp_async_commit();

    const unsigned a_base = smem + (kt % STAGES) * STAGE_BYTES;
    const unsigned b_base = a_base + A_BYTES;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      unsigned a[MI][4], b[NI][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        // Matrices 0-3: rows 0-7 / 8-15 of the 16-row tile, k 0-7 / 8-15.
        const int row = wm * WM + i * 16 + (lane & 15);
        const int chunk = kk * 2 + (lane >> 4);
        ldmatrix_x4(a[i], a_base + swizzle(row * ROW_BYTES + chunk * 16));
      }
#pragma unroll
      for (int j = 0; j < NI; j += 2) {
        // Matrices 0-3: n 0-7 k 0-7, n 0-7 k 8-15, n 8-15 k 0-7, n 8-15 k 8-15.
        const int row = wn * WN + j * 8 + (lane & 7) + ((lane >> 4) << 3);
        const int chunk = kk * 2 + ((lane >> 3) & 1);
        unsigned r[4];
        ldmatrix_x4(r, b_base + swizzle(row * ROW_BYTES + chunk * 16));
        b[j][0] = r[0];
        b[j][1] = r[1];
        b[j + 1][0] = r[2];
        b[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) mma_bf16(acc[i][j], a[i], b[j][0], b[j][1]);
    }
  }
  cp_async_wait<0>();

  // Each thread holds rows lane/4 and lane/4 + 8, columns 2*(lane%4) + {0, 1}.
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const int row = bm * BM + wm * WM + i * 16 + (lane >> 2);
      const int col = bn * BN + wn * WN + j * 8 + (lane & 3) * 2;
      if (col < N) {
        if (row < M)
          *(unsigned*)(C + (size_t)row * N + col) = pack_bf16x2(acc[i][j][0], acc[i][j][1]);
        if (row + 8 < M)
          *(unsigned*)(C + (size_t)(row + 8) * N + col) = pack_bf16x2(acc[i][j][2], acc[i][j][3]);
      }
    }
}
