// NVRTC and nvJitLink compiling real kernels. No GPU is needed to compile;
// loading and running the CUBINs is scripts/device/'s job.

#include <kcache/compiler/backends.h>
#include <kcache/compiler/cubin.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace kcache::compiler {
namespace {

constexpr const char* kTemplatedKernels = R"(
#include "tile.h"
template <typename T, int UNROLL>
__global__ void scale(const T* __restrict__ x, T* __restrict__ y, T a, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    if (i + u < n) y[i + u] = a * x[i + u] * SCALE;
  }
}
extern "C" __global__ void row_sum(const float* x, float* out, int cols) {
  __shared__ float partial[TILE];
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
)";

std::unique_ptr<CompilerBackend> backend_or_skip(Backend b) {
  auto backend = make_backend(b);
  if (!backend) {
    return nullptr;
  }
  return std::move(*backend);
}

#define REQUIRE_BACKEND(var, kind)                                                                 \
  auto var = backend_or_skip(kind);                                                                \
  if (!var) {                                                                                      \
    GTEST_SKIP() << "CUDA Toolkit not built in: the " << backend_name(kind) << " backend is "      \
                 << "unavailable on this machine";                                                 \
  }

CompileSpec templated_spec(std::string target, OutputKind output = OutputKind::kCubin) {
  CompileSpec spec;
  spec.backend = Backend::kCuda;
  spec.source = {"kernels.cu", kTemplatedKernels};
  spec.headers = {{"tile.h", "#pragma once\n#define TILE 256\n"}};
  spec.name_expressions = {"scale<float, 4>", "scale<double, 2>", "row_sum"};
  spec.options = {"-DSCALE=2", "--use_fast_math", "-std=c++17"};
  spec.target = std::move(target);
  spec.output = output;
  return spec;
}

TEST(Nvrtc, CompilesTemplatesToACubinForTheTarget) {
  REQUIRE_BACKEND(nvrtc, Backend::kCuda);
  auto result = nvrtc->compile(templated_spec("sm_90a"));
  ASSERT_TRUE(result.has_value()) << result.error().message << "\n" << result.error().log;
  const auto info = inspect_cubin(result->binary);
  ASSERT_TRUE(info.has_value()) << "not a CUDA ELF";
  EXPECT_EQ(info->sm, 90);
  EXPECT_EQ(result->lowered_names.size(), 3U);
  EXPECT_EQ(result->lowered_names.at("row_sum"), "row_sum");
  EXPECT_EQ(result->lowered_names.at("scale<float, 4>").rfind("_Z", 0), 0U)
      << result->lowered_names.at("scale<float, 4>");
  EXPECT_NE(result->binary.find(result->lowered_names.at("scale<double, 2>")), std::string::npos)
      << "the instantiated template is in the CUBIN's symbol table";

  auto sm80 = nvrtc->compile(templated_spec("sm_80"));
  ASSERT_TRUE(sm80.has_value());
  EXPECT_EQ(inspect_cubin(sm80->binary)->sm, 80);
}

TEST(Nvrtc, PtxThenNvJitLinkToCubin) {
  REQUIRE_BACKEND(nvrtc, Backend::kCuda);
  REQUIRE_BACKEND(linker, Backend::kPtx);
  auto ptx = nvrtc->compile(templated_spec("compute_90a", OutputKind::kPtx));
  ASSERT_TRUE(ptx.has_value()) << ptx.error().message << "\n" << ptx.error().log;
  EXPECT_NE(ptx->binary.find(".target sm_90a"), std::string::npos) << ptx->binary.substr(0, 400);
  EXPECT_NE(ptx->binary.find(".entry row_sum"), std::string::npos);

  CompileSpec link;
  link.backend = Backend::kPtx;
  link.source = {"kernels.ptx", ptx->binary};
  link.target = "sm_90a";
  link.options = {"-O3"};
  auto cubin = linker->compile(link);
  ASSERT_TRUE(cubin.has_value()) << cubin.error().message << "\n" << cubin.error().log;
  EXPECT_EQ(inspect_cubin(cubin->binary)->sm, 90);
  EXPECT_NE(cubin->binary.find("row_sum"), std::string::npos);

  link.source.text = "this is not ptx";
  auto bad = linker->compile(link);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, CompileError::Code::kCompileFailed);
  EXPECT_FALSE(bad.error().log.empty());
}

TEST(Nvrtc, CompileErrorsReturnTheLog) {
  REQUIRE_BACKEND(nvrtc, Backend::kCuda);
  CompileSpec spec = templated_spec("sm_90a");
  spec.source.text = "extern \"C\" __global__ void k(float* y) {\n  y[0] = undeclared_thing;\n}\n";
  spec.name_expressions.clear();
  auto result = nvrtc->compile(spec);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, CompileError::Code::kCompileFailed);
  EXPECT_NE(result.error().log.find("undeclared_thing"), std::string::npos) << result.error().log;
  EXPECT_NE(result.error().log.find("kernels.cu(2)"), std::string::npos) << result.error().log;
  // The message names the first diagnostic, not just NVRTC_ERROR_COMPILATION.
  EXPECT_NE(result.error().message.find(
                "kernels.cu(2): error: identifier \"undeclared_thing\" is undefined"),
            std::string::npos)
      << result.error().message;
  EXPECT_EQ(result.error().log.find('\0'), std::string::npos) << "no NUL in the log";
}

TEST(Nvrtc, TheCubinListsItsKernels) {
  REQUIRE_BACKEND(nvrtc, Backend::kCuda);
  auto result = nvrtc->compile(templated_spec("sm_90a"));
  ASSERT_TRUE(result.has_value()) << result.error().message << "\n" << result.error().log;
  const auto info = inspect_cubin(result->binary);
  ASSERT_TRUE(info.has_value());
  std::vector<std::string> kernels = info->kernels;
  std::sort(kernels.begin(), kernels.end());
  std::vector<std::string> expected = {result->lowered_names.at("row_sum"),
                                       result->lowered_names.at("scale<float, 4>"),
                                       result->lowered_names.at("scale<double, 2>")};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(kernels, expected);
}

// An empty source, or one with device functions only, "compiled" to a CUBIN
// with nothing to launch, which was then served as a hit.
TEST(Nvrtc, NoKernelMeansNoEntryPoints) {
  REQUIRE_BACKEND(nvrtc, Backend::kCuda);
  REQUIRE_BACKEND(linker, Backend::kPtx);
  for (const char* source : {"", "__device__ float twice(float x) { return 2 * x; }\n"}) {
    for (const char* target : {"sm_90a", "compute_90a"}) {
      CompileSpec spec =
          templated_spec(target, std::string_view(target).starts_with("sm_") ? OutputKind::kCubin
                                                                             : OutputKind::kPtx);
      spec.source.text = source;
      spec.name_expressions.clear();
      auto result = nvrtc->compile(spec);
      ASSERT_FALSE(result.has_value()) << target << ": '" << source << "' compiled";
      EXPECT_EQ(result.error().code, CompileError::Code::kCompileFailed);
      EXPECT_NE(result.error().message.find("no entry points"), std::string::npos)
          << result.error().message;
    }
  }
  // PTX with no .entry does not link into a CUBIN with no kernel either.
  CompileSpec link;
  link.backend = Backend::kPtx;
  link.source = {"empty.ptx", ".version 8.0\n.target sm_90a\n.address_size 64\n"};
  link.target = "sm_90a";
  auto linked = linker->compile(link);
  ASSERT_FALSE(linked.has_value());
  EXPECT_NE(linked.error().message.find("no entry points"), std::string::npos)
      << linked.error().message << "\n"
      << linked.error().log;
}

TEST(Nvrtc, EveryNameExpressionMustBeFound) {
  REQUIRE_BACKEND(nvrtc, Backend::kCuda);
  CompileSpec spec = templated_spec("sm_90a");
  spec.name_expressions = {"row_sum", "scale<float, 3>"}; // instantiated by the expression
  auto ok = nvrtc->compile(spec);
  ASSERT_TRUE(ok.has_value()) << ok.error().message << "\n" << ok.error().log;
  EXPECT_EQ(ok->lowered_names.size(), 2U);
  spec.name_expressions = {"row_sum", "no_such_kernel"};
  auto missing = nvrtc->compile(spec);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("no_such_kernel"), std::string::npos)
      << missing.error().message << "\n"
      << missing.error().log;
}

TEST(Nvrtc, RejectsSpecsItCannotHonour) {
  REQUIRE_BACKEND(nvrtc, Backend::kCuda);
  CompileSpec spec = templated_spec("x86-64-v3");
  EXPECT_EQ(nvrtc->compile(spec).error().code, CompileError::Code::kInvalidSpec);
  spec = templated_spec("compute_90"); // a CUBIN needs a real architecture
  EXPECT_EQ(nvrtc->compile(spec).error().code, CompileError::Code::kInvalidSpec);
  spec = templated_spec("sm_90a", OutputKind::kObject);
  EXPECT_EQ(nvrtc->compile(spec).error().code, CompileError::Code::kInvalidSpec);
  spec = templated_spec("sm_90a");
  spec.name_expressions = {"no_such_kernel<int>"};
  EXPECT_FALSE(nvrtc->compile(spec).has_value());
}

TEST(Nvrtc, ToolchainFingerprintNamesTheVersion) {
  REQUIRE_BACKEND(nvrtc, Backend::kCuda);
  const auto fp = nvrtc->toolchain();
  ASSERT_TRUE(fp.components().count("nvrtc"));
  EXPECT_EQ(fp.components().at("nvrtc").rfind("13.", 0), 0U) << fp.components().at("nvrtc");
}

} // namespace
} // namespace kcache::compiler
