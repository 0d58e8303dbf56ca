// LLVM IR -> native objects that are loaded and run here, and -> PTX.

#include <kcache/compiler/backends.h>
#include <kcache/compiler/cubin.h>
#include <kcache/compiler/object_loader.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

namespace kcache::compiler {
namespace {

constexpr const char* kSaxpyIr = R"(
define void @saxpy(float %a, ptr noalias %x, ptr noalias %y, i32 %n) {
entry:
  %any = icmp sgt i32 %n, 0
  br i1 %any, label %loop, label %exit
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %loop ]
  %idx = sext i32 %i to i64
  %px = getelementptr inbounds float, ptr %x, i64 %idx
  %py = getelementptr inbounds float, ptr %y, i64 %idx
  %vx = load float, ptr %px
  %vy = load float, ptr %py
  %ax = fmul float %a, %vx
  %s = fadd float %ax, %vy
  store float %s, ptr %py
  %next = add nsw i32 %i, 1
  %more = icmp slt i32 %next, %n
  br i1 %more, label %loop, label %exit
exit:
  ret void
}

define i64 @sum_i32(ptr %x, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %body ]
  %acc = phi i64 [ 0, %entry ], [ %acc2, %body ]
  %done = icmp eq i64 %i, %n
  br i1 %done, label %exit, label %body
body:
  %p = getelementptr inbounds i32, ptr %x, i64 %i
  %v = load i32, ptr %p
  %w = sext i32 %v to i64
  %acc2 = add i64 %acc, %w
  %next = add i64 %i, 1
  br label %loop
exit:
  ret i64 %acc
}
)";

constexpr const char* kNvptxIr = R"(
define void @scale(ptr addrspace(1) %x, float %a) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %idx = zext i32 %tid to i64
  %p = getelementptr float, ptr addrspace(1) %x, i64 %idx
  %v = load float, ptr addrspace(1) %p
  %m = fmul float %v, %a
  store float %m, ptr addrspace(1) %p
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
!nvvm.annotations = !{!0}
!0 = !{ptr @scale, !"kernel", i32 1}
)";

std::unique_ptr<CompilerBackend> llvm_backend() {
  return std::move(*make_backend(Backend::kLlvmIr));
}

CompileSpec cpu_spec(std::string ir, std::vector<std::string> options = {"-O3"}) {
  CompileSpec spec;
  spec.backend = Backend::kLlvmIr;
  spec.source = {"kernels.ll", std::move(ir)};
  spec.name_expressions = {"saxpy", "sum_i32"};
  spec.options = std::move(options);
  spec.target = "x86-64-v3";
  spec.output = OutputKind::kObject;
  return spec;
}

TEST(LlvmBackend, ObjectIsLoadedRunAndCorrect) {
  for (const std::vector<std::string>& options :
       {std::vector<std::string>{"-O0"}, std::vector<std::string>{"-O3", "-mattr=+avx2"}}) {
    auto result = llvm_backend()->compile(cpu_spec(kSaxpyIr, options));
    ASSERT_TRUE(result.has_value()) << result.error().message << "\n" << result.error().log;
    ASSERT_EQ(result->binary.rfind("\x7f"
                                   "ELF",
                                   0),
              0U)
        << "an ELF object";
    auto loaded = ObjectLoader::load(result->binary);
    ASSERT_TRUE(loaded.has_value()) << loaded.error();
    auto saxpy = (*loaded)->function<void(float, const float*, float*, int)>("saxpy");
    auto sum = (*loaded)->function<std::int64_t(const std::int32_t*, std::int64_t)>("sum_i32");
    ASSERT_TRUE(saxpy.has_value() && sum.has_value());

    constexpr int kN = 1003; // not a multiple of any vector width
    std::vector<float> x(kN), y(kN), expected(kN);
    std::vector<std::int32_t> ints(kN);
    for (int i = 0; i < kN; ++i) {
      x[i] = 0.5f * static_cast<float>(i);
      y[i] = static_cast<float>(kN - i);
      expected[i] = 3.0f * x[i] + y[i];
      ints[i] = i * (i % 2 == 0 ? 1 : -3);
    }
    (*saxpy)(3.0f, x.data(), y.data(), kN);
    for (int i = 0; i < kN; ++i) {
      ASSERT_FLOAT_EQ(y[i], expected[i]) << "element " << i << " at " << options.front();
    }
    std::int64_t reference = 0;
    for (std::int32_t v : ints) {
      reference += v;
    }
    EXPECT_EQ((*sum)(ints.data(), kN), reference);
    EXPECT_FALSE((*loaded)->symbol("not_there").has_value());
  }
}

TEST(LlvmBackend, BitcodeIsAcceptedToo) {
  // Assemble the module to bitcode with LLVM's own llvm-as, then compile that.
  const auto dir = std::filesystem::temp_directory_path();
  const auto ll = dir / ("kcache-saxpy-" + std::to_string(::getpid()) + ".ll");
  const auto bc = dir / ("kcache-saxpy-" + std::to_string(::getpid()) + ".bc");
  std::ofstream(ll) << kSaxpyIr;
  const std::string assemble = "/usr/lib/llvm-19/bin/llvm-as " + ll.string() + " -o " + bc.string();
  ASSERT_EQ(std::system(assemble.c_str()), 0) << assemble;
  std::ifstream in(bc, std::ios::binary);
  const std::string bitcode((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(ll);
  std::filesystem::remove(bc);
  ASSERT_EQ(bitcode.rfind("BC", 0), 0U) << "llvm-as wrote bitcode";

  auto result = llvm_backend()->compile(cpu_spec(bitcode));
  ASSERT_TRUE(result.has_value()) << result.error().message << "\n" << result.error().log;
  auto loaded = ObjectLoader::load(result->binary);
  ASSERT_TRUE(loaded.has_value()) << loaded.error();
  auto sum = (*loaded)->function<std::int64_t(const std::int32_t*, std::int64_t)>("sum_i32");
  ASSERT_TRUE(sum.has_value());
  const std::int32_t values[] = {4, -1, 7};
  EXPECT_EQ((*sum)(values, 3), 10);
}

TEST(LlvmBackend, NvptxEmitsPtxThatNvJitLinkAccepts) {
  CompileSpec spec;
  spec.backend = Backend::kLlvmIr;
  spec.source = {"scale.ll", kNvptxIr};
  spec.name_expressions = {"scale"};
  spec.target = "sm_90a";
  spec.output = OutputKind::kPtx;
  auto ptx = llvm_backend()->compile(spec);
  ASSERT_TRUE(ptx.has_value()) << ptx.error().message << "\n" << ptx.error().log;
  EXPECT_NE(ptx->binary.find(".target sm_90a"), std::string::npos) << ptx->binary.substr(0, 300);
  EXPECT_NE(ptx->binary.find(".visible .entry scale"), std::string::npos) << ptx->binary;

  auto linker = make_backend(Backend::kPtx);
  if (!linker) {
    GTEST_SKIP() << "nvJitLink not built in: PTX checked, CUBIN link skipped";
  }
  CompileSpec link;
  link.backend = Backend::kPtx;
  link.source = {"scale.ptx", ptx->binary};
  link.target = "sm_90a";
  auto cubin = (*linker)->compile(link);
  ASSERT_TRUE(cubin.has_value()) << cubin.error().message << "\n" << cubin.error().log;
  EXPECT_EQ(inspect_cubin(cubin->binary)->sm, 90);
}

TEST(LlvmBackend, ErrorsNameTheProblem) {
  auto bad_ir = llvm_backend()->compile(cpu_spec("define void @f( {"));
  ASSERT_FALSE(bad_ir.has_value());
  EXPECT_EQ(bad_ir.error().code, CompileError::Code::kCompileFailed);
  EXPECT_NE(bad_ir.error().log.find("kernels.ll:1"), std::string::npos) << bad_ir.error().log;

  auto invalid_ir = llvm_backend()->compile(cpu_spec("define i32 @f() {\n  ret void\n}\n"));
  ASSERT_FALSE(invalid_ir.has_value());
  EXPECT_EQ(invalid_ir.error().code, CompileError::Code::kCompileFailed);

  auto bad_option = llvm_backend()->compile(cpu_spec(kSaxpyIr, {"-funroll-everything"}));
  EXPECT_EQ(bad_option.error().code, CompileError::Code::kInvalidSpec);
  EXPECT_NE(bad_option.error().message.find("-funroll-everything"), std::string::npos);

  CompileSpec cpu = cpu_spec(kSaxpyIr);
  cpu.target = "pentium9000";
  EXPECT_EQ(llvm_backend()->compile(cpu).error().code, CompileError::Code::kInvalidSpec);
  cpu = cpu_spec(kSaxpyIr);
  cpu.name_expressions = {"missing_kernel"};
  EXPECT_EQ(llvm_backend()->compile(cpu).error().code, CompileError::Code::kInvalidSpec);
}

// Nothing to call is an error, not an artifact that would be served as a hit.
TEST(LlvmBackend, AModuleWithNoFunctionsHasNoEntryPoints) {
  for (const char* ir :
       {"", "@table = global [4 x i32] zeroinitializer\n",
        "define internal i32 @helper() {\n  ret i32 1\n}\n", "declare void @elsewhere()\n"}) {
    for (OutputKind output : {OutputKind::kObject, OutputKind::kSharedObject}) {
      CompileSpec spec = cpu_spec(ir);
      spec.name_expressions.clear();
      spec.output = output;
      auto result = llvm_backend()->compile(spec);
      ASSERT_FALSE(result.has_value()) << "'" << ir << "' compiled";
      EXPECT_EQ(result.error().code, CompileError::Code::kCompileFailed);
      EXPECT_NE(result.error().message.find("no entry points"), std::string::npos)
          << result.error().message;
    }
  }
  // PTX with no kernel: a device function only, no nvvm.annotations.
  CompileSpec ptx;
  ptx.backend = Backend::kLlvmIr;
  ptx.source = {"device.ll", "define float @twice(float %x) {\n  %y = fmul float %x, 2.0\n"
                             "  ret float %y\n}\n"};
  ptx.target = "sm_90a";
  ptx.output = OutputKind::kPtx;
  auto result = llvm_backend()->compile(ptx);
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message.find("no .entry"), std::string::npos) << result.error().message;
}

TEST(LlvmBackend, ParseErrorsNameTheLineInTheMessage) {
  auto bad_ir = llvm_backend()->compile(cpu_spec("define void @f( {"));
  ASSERT_FALSE(bad_ir.has_value());
  EXPECT_NE(bad_ir.error().message.find("kernels.ll:1:"), std::string::npos)
      << bad_ir.error().message;
  EXPECT_NE(bad_ir.error().message.find(": error: "), std::string::npos) << bad_ir.error().message;
  // Parses, but the verifier refuses it.
  auto invalid_ir = llvm_backend()->compile(
      cpu_spec("define void @f() {\n  %x = add i32 %x, 1\n  ret void\n}\n"));
  ASSERT_FALSE(invalid_ir.has_value());
  EXPECT_NE(invalid_ir.error().message.find("LLVM IR is invalid: "), std::string::npos)
      << invalid_ir.error().message;
  EXPECT_GT(invalid_ir.error().message.size(), std::string("LLVM IR is invalid: ").size())
      << "the verifier's first line follows";
}

TEST(LlvmBackend, ToolchainIsLlvm19) {
  EXPECT_EQ(llvm_backend()->toolchain().components().at("llvm").rfind("19.", 0), 0U);
}

} // namespace
} // namespace kcache::compiler
