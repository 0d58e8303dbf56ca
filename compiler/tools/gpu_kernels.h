#pragma once
// The kernels of the GPU check, shared by the corpus generator (which compiles
// them here) and gpu_check (which runs them on a GPU host).

namespace kcache::gpu_check {

// CUDA C++ for NVRTC. scale<> is a template: instantiated by name expression.
inline constexpr const char* kCudaSource = R"(
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void row_sum(const float* x, float* out, int cols) {
  __shared__ float partial[256];
  float acc = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += x[blockIdx.x * cols + c];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}
template <typename T, int UNROLL>
__global__ void scale(const T* x, T* y, T a, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u)
    if (i + u < n) y[i + u] = a * x[i + u];
}
)";

// LLVM IR for the NVPTX path: y[tid] *= a.
inline constexpr const char* kNvptxIr = R"(
define void @scale_inplace(ptr addrspace(1) %x, float %a, i32 %n) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  %in = icmp slt i32 %i, %n
  br i1 %in, label %body, label %done
body:
  %idx = sext i32 %i to i64
  %p = getelementptr float, ptr addrspace(1) %x, i64 %idx
  %v = load float, ptr addrspace(1) %p
  %m = fmul float %v, %a
  store float %m, ptr addrspace(1) %p
  br label %done
done:
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
!nvvm.annotations = !{!0}
!0 = !{ptr @scale_inplace, !"kernel", i32 1}
)";

} // namespace kcache::gpu_check
