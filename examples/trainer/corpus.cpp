#include "corpus.h"

namespace kcache::trainer {
namespace {

using compiler::Backend;
using compiler::OutputKind;

// Shared by the CUDA and the C++ kernels, passed as an in-memory header.
constexpr const char* kOpsHeader = R"(#pragma once
#ifdef __CUDACC__
#define KC_FN __device__ __forceinline__
#else
#include <math.h>
#define KC_FN static inline
#endif
KC_FN float relu_op(float v) { return v > 0.f ? v : 0.f; }
KC_FN float gelu_op(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678f)); }
KC_FN float silu_op(float v) { return v / (1.f + expf(-v)); }
KC_FN float sigmoid_op(float v) { return 1.f / (1.f + expf(-v)); }
KC_FN float tanh_op(float v) { return tanhf(v); }
KC_FN float exp_op(float v) { return expf(v); }
KC_FN float add_op(float a, float b) { return a + b; }
KC_FN float mul_op(float a, float b) { return a * b; }
KC_FN float sub_op(float a, float b) { return a - b; }
KC_FN float max_op(float a, float b) { return fmaxf(a, b); }
KC_FN float plain_epilogue(float acc, const float* bias, int col) { (void)bias; (void)col; return acc; }
KC_FN float bias_relu_epilogue(float acc, const float* bias, int col) { return relu_op(acc + bias[col]); }
)";

constexpr const char* kCudaUnary = R"(#include "ops.h"
extern "C" __global__ void unary(const float* __restrict__ x, float* __restrict__ y, int n) {
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const int i = base + j;
    if (i < n) y[i] = OP(x[i]);
  }
}
)";

constexpr const char* kCudaBinary = R"(#include "ops.h"
extern "C" __global__ void binary(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = OP(a[i], b[i]);
}
)";

// One partial result per block; the host combines the partials.
constexpr const char* kCudaReduce = R"(#include "ops.h"
extern "C" __global__ void reduce(const float* __restrict__ x, float* __restrict__ partial, int n) {
  __shared__ float s[BLOCK];
  float acc = INIT;
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) acc = OP(acc, x[i]);
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] = OP(s[threadIdx.x], s[threadIdx.x + k]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}
)";

constexpr const char* kCudaBlockReduce = R"(
template <bool Max> __device__ float block_reduce(float v, float* s) {
  s[threadIdx.x] = v;
  __syncthreads();
  for (int k = BLOCK / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] = Max ? fmaxf(s[threadIdx.x], s[threadIdx.x + k])
                                               : s[threadIdx.x] + s[threadIdx.x + k];
    __syncthreads();
  }
  const float r = s[0];
  __syncthreads();
  return r;
}
)";

// One block per row.
constexpr const char* kCudaSoftmax = R"(
extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float s[BLOCK];
  const float* xr = x + (size_t)blockIdx.x * cols;
  float* yr = y + (size_t)blockIdx.x * cols;
  float m = -3.0e38f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf(m, xr[c]);
  m = block_reduce<true>(m, s);
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) sum += expf(xr[c] - m);
  sum = block_reduce<false>(sum, s);
  for (int c = threadIdx.x; c < cols; c += BLOCK) yr[c] = expf(xr[c] - m) / sum;
}
)";

constexpr const char* kCudaLayerNorm = R"(
extern "C" __global__ void layernorm(const float* __restrict__ x, const float* __restrict__ gamma,
                                     const float* __restrict__ beta, float* __restrict__ y,
                                     int rows, int cols, float eps) {
  __shared__ float s[BLOCK];
  const float* xr = x + (size_t)blockIdx.x * cols;
  float* yr = y + (size_t)blockIdx.x * cols;
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) sum += xr[c];
  const float mean = block_reduce<false>(sum, s) / cols;
  float sq = 0.f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) { const float d = xr[c] - mean; sq += d * d; }
  const float rstd = rsqrtf(block_reduce<false>(sq, s) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += BLOCK) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
}
)";

// TILE x TILE threads per block on a 1-D grid of output tiles.
constexpr const char* kCudaGemm = R"(#include "ops.h"
extern "C" __global__ void gemm(const float* __restrict__ A, const float* __restrict__ B,
                                const float* __restrict__ bias, float* __restrict__ C,
                                int M, int N, int K) {
  __shared__ float As[TILE][TILE + 1];
  __shared__ float Bs[TILE][TILE + 1];
  const int tiles_n = (N + TILE - 1) / TILE;
  const int bx = blockIdx.x % tiles_n, by = blockIdx.x / tiles_n;
  const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
  const int row = by * TILE + ty, col = bx * TILE + tx;
  float acc = 0.f;
  for (int t = 0; t < K; t += TILE) {
    As[ty][tx] = (row < M && t + tx < K) ? A[(size_t)row * K + t + tx] : 0.f;
    Bs[ty][tx] = (t + ty < K && col < N) ? B[(size_t)(t + ty) * N + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = EPILOGUE(acc, bias, col);
}
)";

constexpr const char* kCppElementwise = R"(#include "ops.h"
extern "C" void unary(const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = OP(x[i]);
}
)";

constexpr const char* kCppBinary = R"(#include "ops.h"
extern "C" void binary(const float* a, const float* b, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = OP(a[i], b[i]);
}
)";

// UNROLL independent accumulators: the vectorizer's friend.
constexpr const char* kCppReduce = R"(#include "ops.h"
extern "C" void reduce(const float* x, float* out, int n) {
  float acc[UNROLL];
  for (int j = 0; j < UNROLL; ++j) acc[j] = INIT;
  int i = 0;
  for (; i + UNROLL <= n; i += UNROLL)
    for (int j = 0; j < UNROLL; ++j) acc[j] = OP(acc[j], x[i + j]);
  float r = INIT;
  for (int j = 0; j < UNROLL; ++j) r = OP(r, acc[j]);
  for (; i < n; ++i) r = OP(r, x[i]);
  out[0] = r;
}
)";

constexpr const char* kCppRows = R"(#include "ops.h"
extern "C" void softmax(const float* x, float* y, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + (long)r * cols;
    float* yr = y + (long)r * cols;
    float m = -3.0e38f, sum = 0.f;
    for (int c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
    for (int c = 0; c < cols; ++c) { yr[c] = expf(xr[c] - m); sum += yr[c]; }
    for (int c = 0; c < cols; ++c) yr[c] /= sum;
  }
}
extern "C" void layernorm(const float* x, const float* gamma, const float* beta, float* y,
                          int rows, int cols, float eps) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + (long)r * cols;
    float* yr = y + (long)r * cols;
    float mean = 0.f, var = 0.f;
    for (int c = 0; c < cols; ++c) mean += xr[c];
    mean /= cols;
    for (int c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    const float rstd = 1.f / sqrtf(var / cols + eps);
    for (int c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
  }
}
)";

constexpr const char* kCppGemm = R"(#include "ops.h"
extern "C" void gemm(const float* A, const float* B, const float* bias, float* C,
                     int M, int N, int K) {
  for (int i = 0; i < M * N; ++i) C[i] = 0.f;
  for (int i0 = 0; i0 < M; i0 += TILE)
    for (int k0 = 0; k0 < K; k0 += TILE)
      for (int j0 = 0; j0 < N; j0 += TILE)
        for (int i = i0; i < i0 + TILE && i < M; ++i)
          for (int k = k0; k < k0 + TILE && k < K; ++k) {
            const float a = A[(long)i * K + k];
            for (int j = j0; j < j0 + TILE && j < N; ++j) C[(long)i * N + j] += a * B[(long)k * N + j];
          }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) C[(long)i * N + j] = EPILOGUE(C[(long)i * N + j], bias, j);
}
)";

// Hand-written LLVM IR, the llvm-ir backend's corpus: an elementwise loop
// over i < n, whose body reads element %idx and stores %r.
std::string ir_loop(const std::string& signature, const std::string& body) {
  return "define void " + signature + R"( {
entry:
  %any = icmp sgt i32 %n, 0
  br i1 %any, label %loop, label %exit
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %loop ]
  %idx = zext i32 %i to i64
)" + body +
         R"(
  %next = add nuw nsw i32 %i, 1
  %done = icmp eq i32 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
)";
}

const std::string kIrUnary = ir_loop("@unary(ptr noalias %x, ptr noalias %y, i32 %n)", R"(
  %px = getelementptr inbounds float, ptr %x, i64 %idx
  %v = load float, ptr %px
  %pos = fcmp ogt float %v, 0.0
  %r = select i1 %pos, float %v, float 0.0
  %py = getelementptr inbounds float, ptr %y, i64 %idx
  store float %r, ptr %py)");

const std::string kIrBinary =
    ir_loop("@binary(ptr noalias %a, ptr noalias %b, ptr noalias %y, i32 %n)", R"(
  %pa = getelementptr inbounds float, ptr %a, i64 %idx
  %pb = getelementptr inbounds float, ptr %b, i64 %idx
  %va = load float, ptr %pa
  %vb = load float, ptr %pb
  %r = fmul float %va, %vb
  %py = getelementptr inbounds float, ptr %y, i64 %idx
  store float %r, ptr %py)");

const std::string kIrSaxpy = ir_loop("@saxpy(float %a, ptr noalias %x, ptr noalias %y, i32 %n)", R"(
  %px = getelementptr inbounds float, ptr %x, i64 %idx
  %py = getelementptr inbounds float, ptr %y, i64 %idx
  %vx = load float, ptr %px
  %vy = load float, ptr %py
  %m = fmul float %a, %vx
  %r = fadd float %m, %vy
  store float %r, ptr %py)");

class CorpusBuilder {
public:
  explicit CorpusBuilder(std::string cpu_target) : cpu_target_(std::move(cpu_target)) {}

  void cuda(std::string name, Family family, std::string op, std::string body,
            const std::vector<std::string>& defines, int block = 256, int vec = 1, int tile = 16) {
    Kernel k{std::move(name), family, Device::kCuda, std::move(op), block, vec, tile, {}, {}};
    k.spec.backend = Backend::kCuda;
    k.spec.source = {"kernel.cu", std::move(body)};
    k.spec.headers = {{"ops.h", kOpsHeader}};
    k.spec.options = {"--use_fast_math", "-std=c++17"};
    for (const std::string& d : defines) {
      k.spec.options.push_back("-D" + d);
    }
    k.spec.target = "sm_90a";
    k.spec.output = OutputKind::kCubin;
    k.entry = entry_of(family);
    k.spec.name_expressions = {k.entry};
    kernels_.push_back(std::move(k));
  }

  void cpu(std::string name, Family family, std::string op, Backend backend, std::string body,
           const std::vector<std::string>& defines, int tile = 16) {
    Kernel k{std::move(name), family, Device::kCpu, std::move(op), 0, 1, tile, {}, {}};
    k.spec.backend = backend;
    k.spec.source = {backend == Backend::kCpp ? "kernel.cpp" : "kernel.ll", std::move(body)};
    if (backend == Backend::kCpp) {
      k.spec.headers = {{"ops.h", kOpsHeader}};
    }
    k.spec.options = {"-O3"};
    for (const std::string& d : defines) {
      k.spec.options.push_back("-D" + d);
    }
    k.spec.target = cpu_target_;
    k.spec.output = OutputKind::kSharedObject;
    k.entry = entry_of(family);
    k.spec.name_expressions = {k.entry};
    kernels_.push_back(std::move(k));
  }

  std::vector<Kernel> take() { return std::move(kernels_); }

private:
  static std::string entry_of(Family family) {
    switch (family) {
    case Family::kUnary:
      return "unary";
    case Family::kBinary:
      return "binary";
    case Family::kReduce:
      return "reduce";
    case Family::kSoftmax:
      return "softmax";
    case Family::kLayerNorm:
      return "layernorm";
    case Family::kGemm:
      return "gemm";
    case Family::kSaxpy:
      return "saxpy";
    }
    return "";
  }

  std::string cpu_target_;
  std::vector<Kernel> kernels_;
};

const char* reduce_init(const std::string& op) {
  return op == "max" ? "INIT=-3.0e38f" : "INIT=0.f";
}

} // namespace

std::vector<Kernel> build_corpus(const std::string& cpu_target) {
  CorpusBuilder c(cpu_target);
  const std::vector<std::string> unary = {"relu", "gelu", "silu", "sigmoid", "tanh", "exp"};
  const std::string block_reduce = kCudaBlockReduce;

  // CUDA, sm_90a: 36 kernels.
  for (const std::string& op : unary) {
    for (int vec : {1, 4}) {
      c.cuda("cuda/" + op + "/vec" + std::to_string(vec), Family::kUnary, op, kCudaUnary,
             {"OP=" + op + "_op", "VEC=" + std::to_string(vec)}, 256, vec);
    }
  }
  for (const std::string op : {"add", "mul", "sub", "max"}) {
    c.cuda("cuda/" + op, Family::kBinary, op, kCudaBinary, {"OP=" + op + "_op"});
  }
  for (const std::string op : {"sum", "max"}) {
    for (int block : {128, 256, 512}) {
      c.cuda("cuda/reduce_" + op + "/block" + std::to_string(block), Family::kReduce, op,
             kCudaReduce,
             {std::string("OP=") + (op == "sum" ? "add_op" : "max_op"), reduce_init(op),
              "BLOCK=" + std::to_string(block)},
             block);
    }
  }
  for (int block : {128, 256, 512, 1024}) {
    c.cuda("cuda/softmax/block" + std::to_string(block), Family::kSoftmax, "softmax",
           block_reduce + kCudaSoftmax, {"BLOCK=" + std::to_string(block)}, block);
    c.cuda("cuda/layernorm/block" + std::to_string(block), Family::kLayerNorm, "layernorm",
           block_reduce + kCudaLayerNorm, {"BLOCK=" + std::to_string(block)}, block);
  }
  for (const std::string epilogue : {"plain", "bias_relu"}) {
    for (int tile : {8, 16, 32}) {
      c.cuda("cuda/gemm_" + epilogue + "/tile" + std::to_string(tile), Family::kGemm, epilogue,
             kCudaGemm, {"TILE=" + std::to_string(tile), "EPILOGUE=" + epilogue + "_epilogue"},
             tile * tile, 1, tile);
    }
  }

  // CPU, C++ through clang: 18 kernels.
  for (const std::string& op : unary) {
    c.cpu("cpu/" + op, Family::kUnary, op, Backend::kCpp, kCppElementwise, {"OP=" + op + "_op"});
  }
  for (const std::string op : {"add", "mul"}) {
    c.cpu("cpu/" + op, Family::kBinary, op, Backend::kCpp, kCppBinary, {"OP=" + op + "_op"});
  }
  for (int unroll : {1, 4, 8}) {
    c.cpu("cpu/reduce_sum/unroll" + std::to_string(unroll), Family::kReduce, "sum", Backend::kCpp,
          kCppReduce, {"OP=add_op", "INIT=0.f", "UNROLL=" + std::to_string(unroll)});
  }
  c.cpu("cpu/reduce_max/unroll8", Family::kReduce, "max", Backend::kCpp, kCppReduce,
        {"OP=max_op", "INIT=-3.0e38f", "UNROLL=8"});
  c.cpu("cpu/softmax", Family::kSoftmax, "softmax", Backend::kCpp, kCppRows, {});
  c.cpu("cpu/layernorm", Family::kLayerNorm, "layernorm", Backend::kCpp, kCppRows, {});
  for (int tile : {16, 32, 64}) {
    c.cpu("cpu/gemm_plain/tile" + std::to_string(tile), Family::kGemm, "plain", Backend::kCpp,
          kCppGemm, {"TILE=" + std::to_string(tile), "EPILOGUE=plain_epilogue"}, tile);
  }
  c.cpu("cpu/gemm_bias_relu/tile32", Family::kGemm, "bias_relu", Backend::kCpp, kCppGemm,
        {"TILE=32", "EPILOGUE=bias_relu_epilogue"}, 32);

  // CPU, LLVM IR: 3 kernels (defines do not apply to IR).
  c.cpu("cpu-ir/relu", Family::kUnary, "relu", Backend::kLlvmIr, kIrUnary, {});
  c.cpu("cpu-ir/mul", Family::kBinary, "mul", Backend::kLlvmIr, kIrBinary, {});
  c.cpu("cpu-ir/saxpy", Family::kSaxpy, "saxpy", Backend::kLlvmIr, kIrSaxpy, {});
  return c.take();
}

} // namespace kcache::trainer
