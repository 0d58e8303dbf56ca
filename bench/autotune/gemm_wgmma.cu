// A bf16 tensor-core GEMM template for max-autotune on sm_90a (wgmma):
// C[M,N] = A[M,K] * B[N,K]^T with A and B row-major bf16 (B is N x K,
// nn.Linear's weight layout: "TN" in BLAS terms), fp32 accumulation and C
// row-major bf16 (rounded to nearest even): the same contract as gemm_tc.cu.
//
// A block of WGS warpgroups (128 threads each) computes a BM x BN tile of C
// through 64-deep K slices; each warpgroup owns BM / WGS rows, issued as
// wgmma.mma_async m64 x BN x k16 on operands read from shared memory through
// descriptors. Slices are loaded by every thread with 16-byte cp.async into
// STAGES buffers in the 128-byte-swizzle layout wgmma reads (rows of 128
// bytes; 16-byte chunk c of row r at chunk c ^ (r % 8); 1024-byte atoms),
// which also keeps the copies free of bank conflicts. The loads run
// STAGES - 2 slices ahead: one block barrier per slice suffices, because a
// buffer is refilled only after every warpgroup's wgmma on it has retired
// (wgmma.wait_group 1 leaves one slice's wgmma in flight). Blocks go in
// groups of GROUP_M row tiles that sweep the column tiles together, sharing
// A and B in L2.
//
// Tried on an H100 and left out, slower for the winning 128 x 256 tile: a
// warp-specialized producer warpgroup (cp.async + mbarriers, setmaxnreg),
// loads STAGES - 1 ahead with two barriers per slice, and a persistent grid
// loading the next tile during the stores (TMA, which would free the
// consumers from issuing copies, needs tensor maps the benchmark cannot pass).
//
// Needs K % 8 == 0 and N % 8 == 0; M and N need not divide by the tile.
// Launch: grid ceil_div(M, BM) * ceil_div(N, BN), block WGS * 128, dynamic
// shared memory STAGES * (BM + BN) * 128 + 1024 bytes (the 1024 aligns the
// buffers to the swizzle's atoms).

#define BK 64
#define ROW_BYTES 128
#define THREADS (WGS * 128)
#define WG_ROWS (BM / WGS)
#define MT (WG_ROWS / 64)
#define A_BYTES (BM * ROW_BYTES)
#define STAGE_BYTES ((BM + BN) * ROW_BYTES)
#ifndef GROUP_M
#define GROUP_M 8
#endif

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
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// cp.async writes through the generic proxy; wgmma reads through the async one.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// A K-major operand in the 128-byte swizzle: 8-row groups 1024 bytes apart.
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr) {
  return (unsigned long long)((addr & 0x3ffff) >> 4) | (1ull << 16) | (64ull << 32) |
         (1ull << 62);
}

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned out;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(out) : "f"(hi), "f"(lo));
  return out;
}

// The wgmma shapes the template uses; they differ only in N.
__device__ __forceinline__ void wgmma_n64(float* d, unsigned long long a,
                                          unsigned long long b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
               "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(a), "l"(b), "r"(1));
}

__device__ __forceinline__ void wgmma_n128(float* d, unsigned long long a,
                                          unsigned long long b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
               "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                 "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                 "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(a), "l"(b), "r"(1));
}

__device__ __forceinline__ void wgmma_n256(float* d, unsigned long long a,
                                          unsigned long long b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
               "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
               "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
               "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
               "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
               "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                 "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                 "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                 "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                 "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                 "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                 "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                 "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                 "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                 "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                 "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
               : "l"(a), "l"(b), "r"(1));
}


#if BN == 64
#define WGMMA wgmma_n64
#elif BN == 128
#define WGMMA wgmma_n128
#elif BN == 256
#define WGMMA wgmma_n256
#else
#error "BN must be 64, 128 or 256"
#endif

// ROWS x 64 of a K-major matrix (rows_total x K) into swizzled shared memory.
template <int ROWS>
__device__ __forceinline__ void load_tile(unsigned smem, const bf16_bits* __restrict__ g,
                                          int rows_total, int row0, int K, int k0) {
  constexpr int kChunks = ROWS * 8;
#pragma unroll
  for (int step = 0; step < (kChunks + THREADS - 1) / THREADS; ++step) {
    const int i = step * THREADS + (int)threadIdx.x;
    if (kChunks % THREADS != 0 && i >= kChunks) break;
    const int r = i / 8, c = i % 8;
    const int gr = row0 + r, gk = k0 + c * 8;
    const bool in_range = gr < rows_total && gk < K;
    const bf16_bits* src = in_range ? g + (size_t)gr * K + gk : g;
    cp_async16(smem + swizzle(r * ROW_BYTES + c * 16), src, in_range);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS)
    gemm_bf16_wgmma(const bf16_bits* __restrict__ A, const bf16_bits* __restrict__ B,
                    bf16_bits* __restrict__ C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  const unsigned smem = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;

  // Grouped ordering: GROUP_M row tiles sweep the column tiles together.
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (blockIdx.x / per_group) * GROUP_M;
  const int group_m = min(tiles_m - first_m, GROUP_M);
  const int bm = first_m + (blockIdx.x % per_group) % group_m;
  const int bn = (blockIdx.x % per_group) / group_m;
  const int wg = threadIdx.x / 128;

  float acc[MT][BN / 2];
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) acc[t][e] = 0.f;

  const int k_tiles = (K + BK - 1) / BK;
  auto load_stage = [&](int stage, int kt) {
    const unsigned base = smem + stage * STAGE_BYTES;
    load_tile<BM>(base, A, M, bm * BM, K, kt * BK);
    load_tile<BN>(base + A_BYTES, B, N, bn * BN, K, kt * BK);
  };
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < k_tiles) load_stage(s, s);
    cp_async_commit(); // empty groups keep the count uniform
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<STAGES - 3>(); // this thread's copies of slice kt landed
    fence_proxy_async();
    __syncthreads(); // everyone's; and every wgmma on slice kt - 2 retired
    const int next = kt + STAGES - 2;
    if (next < k_tiles) load_stage(next % STAGES, next);
    cp_async_commit();

    const unsigned a_base = smem + (kt % STAGES) * STAGE_BYTES + wg * WG_ROWS * ROW_BYTES;
    const unsigned b_base = smem + (kt % STAGES) * STAGE_BYTES + A_BYTES;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)
#pragma unroll
      for (int t = 0; t < MT; ++t)
        WGMMA(acc[t], smem_desc(a_base + t * 64 * ROW_BYTES + kk * 32),
              smem_desc(b_base + kk * 32));
    wgmma_commit();
    wgmma_wait<1>(); // slice kt - 1's wgmma retired: its buffer is free after the next barrier
  }
  wgmma_wait<0>();
  cp_async_wait<0>();

  // The tile goes out through shared memory (rows padded by 16 bytes against
  // bank conflicts) as 16-byte coalesced stores: storing the fragments
  // directly (4 bytes, 8 rows per warp store) took 10% longer on an H100.
  // Warp w of a warpgroup holds rows 16w + lane/4 (+ 8) of each m64 tile,
  // columns 8j + 2*(lane%4) + {0, 1}.
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  constexpr int kPitch = BN * 2 + 16;
  __syncthreads(); // every warpgroup is done with the buffers
  const unsigned out = smem + wg * WG_ROWS * kPitch;
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int r = t * 64 + warp * 16 + (lane >> 2), c = j * 8 + (lane & 3) * 2;
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(out + r * kPitch + c * 2),
                   "r"(pack_bf16x2(acc[t][j * 4], acc[t][j * 4 + 1])));
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(out + (r + 8) * kPitch + c * 2),
                   "r"(pack_bf16x2(acc[t][j * 4 + 2], acc[t][j * 4 + 3])));
    }
  asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 1)); // this warpgroup's rows are staged
  constexpr int kChunksPerRow = BN / 8;
#pragma unroll 4
  for (int i = threadIdx.x % 128; i < WG_ROWS * kChunksPerRow; i += 128) {
    const int r = i / kChunksPerRow, c = i % kChunksPerRow;
    const int row = bm * BM + wg * WG_ROWS + r, col = bn * BN + c * 8;
    if (row < M && col < N) {
      uint4 v;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "r"(out + r * kPitch + c * 16));
      *(uint4*)(C + (size_t)row * N + col) = v;
    }
  }
}
