// Compiler logs as they leave the worker: valid UTF-8, no NULs, and the first
// diagnostic of each compiler's format found for the job's error message.

#include <kcache/compiler/diagnostics.h>

#include <gtest/gtest.h>

namespace kcache::compiler {
namespace {

using namespace std::string_literals;

TEST(Diagnostics, CleanLogDropsNulsAndReplacesInvalidUtf8) {
  EXPECT_EQ(clean_log("Ptx assembly aborted due to errors\n\0"s),
            "Ptx assembly aborted due to errors\n");
  EXPECT_EQ(clean_log("a\0b\0\0c"s), "abc");
  EXPECT_EQ(clean_log("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80")
      << "valid UTF-8 is kept";
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(clean_log("x\xFFy"), "x" + fffd + "y");
  EXPECT_EQ(clean_log("\xC3"), fffd) << "a truncated sequence";
  EXPECT_EQ(clean_log("\xC0\xAF"), fffd + fffd) << "an overlong '/'";
  EXPECT_EQ(clean_log("\xED\xA0\x80"), fffd + fffd + fffd) << "a UTF-16 surrogate";
  EXPECT_EQ(clean_log("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd) << "past U+10FFFF";
  EXPECT_EQ(clean_log(""), "");
}

TEST(Diagnostics, FirstDiagnosticOfEachCompiler) {
  // NVRTC
  EXPECT_EQ(first_diagnostic("kernels.cu(2): warning #177-D: variable \"u\" was declared\n"
                             "kernels.cu(3): error: identifier \"undeclared_thing\" is undefined\n"
                             "    y[0] = undeclared_thing;\n"
                             "kernels.cu(4): error: expected a \";\"\n"
                             "2 errors detected in the compilation of \"kernels.cu\".\n"),
            "kernels.cu(3): error: identifier \"undeclared_thing\" is undefined");
  EXPECT_EQ(
      first_diagnostic("kernels.cu(1): catastrophic error: cannot open source file \"x.h\"\n"),
      "kernels.cu(1): catastrophic error: cannot open source file \"x.h\"");
  // clang
  EXPECT_EQ(first_diagnostic("/kcache-spec/job.cpp:1:5: warning: unused [-Wunused]\n"
                             "/kcache-spec/job.cpp:2:10: error: use of undeclared identifier 'x'\n"
                             "    2 |   return x;\n"
                             "      |          ^\n"
                             "1 error generated.\n"),
            "/kcache-spec/job.cpp:2:10: error: use of undeclared identifier 'x'");
  EXPECT_EQ(first_diagnostic("job.cpp:1:10: fatal error: 'nope.h' file not found\n"),
            "job.cpp:1:10: fatal error: 'nope.h' file not found");
  // ptxas and nvJitLink, with their padded severities
  EXPECT_EQ(first_diagnostic("ptxas fatal   : Unresolved extern function 'f'\r\n"),
            "ptxas fatal   : Unresolved extern function 'f'");
  EXPECT_EQ(first_diagnostic("error   : Undefined reference to 'g' in 'k.ptx'\n"),
            "error   : Undefined reference to 'g' in 'k.ptx'");
  // No diagnostic: summaries and warnings are not errors.
  EXPECT_EQ(first_diagnostic("Ptx assembly aborted due to errors\n\0"s), "");
  EXPECT_EQ(first_diagnostic("1 error generated.\n"), "");
  EXPECT_EQ(first_diagnostic("k.cu(1): warning: something\nterror: is not a severity\n"), "");
  EXPECT_EQ(first_diagnostic(""), "");
  // A huge line is cut, on a character boundary.
  const std::string huge = first_diagnostic("k.cpp:1:1: error: " + std::string(5000, 'x'));
  EXPECT_LT(huge.size(), 500U);
  EXPECT_TRUE(huge.ends_with("..."));
}

TEST(Diagnostics, LogTailIsBoundedAndStaysUtf8) {
  EXPECT_EQ(log_tail("short", 100), "short");
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text += "\xE2\x82\xAC"; // 3 bytes each
  }
  const std::string t = log_tail(text, 100);
  EXPECT_LE(t.size(), 104U);
  EXPECT_EQ(clean_log(t), t) << "no character cut in half";
  EXPECT_EQ(log_tail("first line\nsecond line\nthird", 12), "...\nthird");
}

TEST(Diagnostics, TidyErrorNamesTheFirstDiagnostic) {
  CompileError e{CompileError::Code::kCompileFailed,
                 "NVRTC compile failed: NVRTC_ERROR_COMPILATION",
                 "k.cu(2): error: identifier \"x\" is undefined\n\0"s};
  const CompileError tidy = tidy_error(e);
  EXPECT_EQ(tidy.message, "k.cu(2): error: identifier \"x\" is undefined "
                          "(NVRTC compile failed: NVRTC_ERROR_COMPILATION)");
  EXPECT_EQ(tidy.log, "k.cu(2): error: identifier \"x\" is undefined\n");
  EXPECT_EQ(tidy_error(tidy).message, tidy.message) << "idempotent";
  EXPECT_EQ(tidy_error({CompileError::Code::kCompileFailed, "", "k.cpp:1:2: error: y\n"}).message,
            "k.cpp:1:2: error: y");
  EXPECT_EQ(tidy_error({CompileError::Code::kInvalidSpec, "bad option", "no diagnostic"}).message,
            "bad option");
  // A resource limit's message is the runner's; its log is still cleaned.
  const CompileError limit =
      tidy_error({CompileError::Code::kResourceLimit, "memory", "k.cu(1): error: x\0"s});
  EXPECT_EQ(limit.message, "memory");
  EXPECT_EQ(limit.log, "k.cu(1): error: x");
}

TEST(Diagnostics, OutOfMemoryLines) {
  EXPECT_EQ(out_of_memory_line("noise\nptxas fatal   : Memory allocation failure\n"),
            "ptxas fatal   : Memory allocation failure");
  EXPECT_EQ(out_of_memory_line("LLVM ERROR: out of memory\nAllocation failed\n"),
            "LLVM ERROR: out of memory");
  EXPECT_EQ(out_of_memory_line("terminate called after throwing an instance of "
                               "'std::bad_alloc'\n  what():  std::bad_alloc\n"),
            "terminate called after throwing an instance of 'std::bad_alloc'");
  EXPECT_EQ(out_of_memory_line("crashing_worker: read 10 bytes, now faulting\n"), "");
  EXPECT_EQ(out_of_memory_line(""), "");
}

} // namespace
} // namespace kcache::compiler
