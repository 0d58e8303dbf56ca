// C++ CPU kernels compiled by clang's libraries in process, then run here.

#include <kcache/compiler/backends.h>
#include <kcache/compiler/object_loader.h>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kcache::compiler {
namespace {

constexpr const char* kKernels = R"(
#include <cmath>
#include <cstdint>
#include "blocking.h"

namespace {
template <int BLOCK>
void matmul_blocked(const float* a, const float* b, float* c, int n) {
  for (int i = 0; i < n * n; ++i) c[i] = 0.f;
  for (int ii = 0; ii < n; ii += BLOCK)
    for (int kk = 0; kk < n; kk += BLOCK)
      for (int i = ii; i < ii + BLOCK && i < n; ++i)
        for (int k = kk; k < kk + BLOCK && k < n; ++k) {
          const float aik = a[i * n + k];
          for (int j = 0; j < n; ++j) c[i * n + j] += aik * b[k * n + j];
        }
}
} // namespace

extern "C" void matmul(const float* a, const float* b, float* c, int n) {
  matmul_blocked<KCACHE_BLOCK>(a, b, c, n);
}

extern "C" float softmax_row(const float* x, float* y, int n) {
  float m = x[0];
  for (int i = 1; i < n; ++i) m = std::fmax(m, x[i]);
  float sum = 0.f;
  for (int i = 0; i < n; ++i) { y[i] = std::exp(x[i] - m); sum += y[i]; }
  for (int i = 0; i < n; ++i) y[i] /= sum;
  return SCALE_CHECK;
}
)";

CompileSpec spec(std::vector<std::string> options = {"-O3", "-std=c++20", "-DSCALE_CHECK=1.5f"}) {
  CompileSpec s;
  s.backend = Backend::kCpp;
  s.source = {"kernels.cpp", kKernels};
  s.headers = {{"blocking.h", "#pragma once\n#define KCACHE_BLOCK 16\n"}};
  s.name_expressions = {"matmul", "softmax_row"};
  s.options = std::move(options);
  s.target = "x86-64-v3";
  s.output = OutputKind::kObject;
  return s;
}

TEST(CppBackend, CompilesLoadsAndComputesCorrectly) {
  auto backend = make_backend(Backend::kCpp);
  ASSERT_TRUE(backend.has_value());
  auto result = (*backend)->compile(spec());
  ASSERT_TRUE(result.has_value()) << result.error().message << "\n" << result.error().log;
  auto loaded = ObjectLoader::load(result->binary);
  ASSERT_TRUE(loaded.has_value()) << loaded.error();
  auto matmul = (*loaded)->function<void(const float*, const float*, float*, int)>("matmul");
  auto softmax = (*loaded)->function<float(const float*, float*, int)>("softmax_row");
  ASSERT_TRUE(matmul.has_value() && softmax.has_value());

  constexpr int kN = 37;
  std::vector<float> a(kN * kN), b(kN * kN), c(kN * kN), ref(kN * kN, 0.f);
  for (int i = 0; i < kN * kN; ++i) {
    a[i] = static_cast<float>((i * 7) % 13) - 6.f;
    b[i] = static_cast<float>((i * 5) % 11) - 5.f;
  }
  for (int i = 0; i < kN; ++i) {
    for (int k = 0; k < kN; ++k) {
      for (int j = 0; j < kN; ++j) {
        ref[i * kN + j] += a[i * kN + k] * b[k * kN + j];
      }
    }
  }
  (*matmul)(a.data(), b.data(), c.data(), kN);
  for (int i = 0; i < kN * kN; ++i) {
    ASSERT_FLOAT_EQ(c[i], ref[i]) << "element " << i;
  }

  std::vector<float> x = {1.f, 2.f, 3.f, -1.f}, y(4);
  EXPECT_FLOAT_EQ((*softmax)(x.data(), y.data(), 4), 1.5f) << "the -D define reached the source";
  float total = 0.f;
  for (float v : y) {
    total += v;
  }
  EXPECT_NEAR(total, 1.f, 1e-6);
  EXPECT_NEAR(y[2], std::exp(0.f) / (std::exp(-2.f) + std::exp(-1.f) + 1.f + std::exp(-4.f)), 1e-6);
}

TEST(CppBackend, CompileErrorsComeWithClangsDiagnostic) {
  CompileSpec s = spec();
  s.source.text = "extern \"C\" int f() {\n  return undefined_variable;\n}\n";
  s.name_expressions = {"f"};
  auto result = (*make_backend(Backend::kCpp))->compile(s);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, CompileError::Code::kCompileFailed);
  EXPECT_NE(result.error().log.find("kernels.cpp:2"), std::string::npos) << result.error().log;
  EXPECT_NE(result.error().log.find("undefined_variable"), std::string::npos) << result.error().log;
}

// Inline asm once aborted the whole worker (no asm parser was registered).
TEST(CppBackend, CompilesInlineAsm) {
  CompileSpec s = spec();
  s.source.text = "extern \"C\" int f(int x) {\n  asm volatile(\"nop\");\n  int y;\n"
                  "  asm(\"leal 1(%1), %0\" : \"=r\"(y) : \"r\"(x));\n  return y;\n}\n";
  s.name_expressions = {"f"};
  s.output = OutputKind::kObject;
  auto result = (*make_backend(Backend::kCpp))->compile(s);
  ASSERT_TRUE(result.has_value()) << result.error().message << "\n" << result.error().log;
  EXPECT_EQ(result->binary.rfind("\x7f"
                                 "ELF",
                                 0),
            0U);
}

TEST(CppBackend, RejectsWhatItCannotDo) {
  CompileSpec s = spec();
  s.output = OutputKind::kCubin;
  EXPECT_EQ((*make_backend(Backend::kCpp))->compile(s).error().code,
            CompileError::Code::kInvalidSpec);
  s = spec();
  s.target = "pentium9000";
  EXPECT_FALSE((*make_backend(Backend::kCpp))->compile(s).has_value());
  EXPECT_EQ((*make_backend(Backend::kCpp))->toolchain().components().at("clang").rfind("19.", 0),
            0U);
}

} // namespace
} // namespace kcache::compiler
