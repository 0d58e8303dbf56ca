// Hermetic compile specs: a spec that could make a worker read or write a
// host file is refused before it is keyed, with a reason; a spec that only
// uses its own headers and the toolchain's passes, with canonical options.

#include <kcache/compiler/compile_spec.h>
#include <kcache/compiler/spec_check.h>

#include <gtest/gtest.h>

namespace kcache::compiler {
namespace {

CompileSpec cuda(std::string source, std::vector<std::string> options = {}) {
  CompileSpec s;
  s.backend = Backend::kCuda;
  s.source = {"k.cu", std::move(source)};
  s.headers = {{"h.h", "#define H 1\n"}, {"detail/d.h", "#define D 1\n"}};
  s.options = std::move(options);
  s.target = "sm_90a";
  return s;
}

CompileSpec cpp(std::string source, std::vector<std::string> options = {}) {
  CompileSpec s = cuda(std::move(source), std::move(options));
  s.backend = Backend::kCpp;
  s.source.name = "k.cpp";
  s.target = "x86-64-v3";
  s.output = OutputKind::kSharedObject;
  return s;
}

constexpr const char* kKernel = "extern \"C\" __global__ void k(int* x) { *x = 1; }\n";

void expect_refused(const CompileSpec& spec, std::string_view why) {
  auto out = prepare_spec(spec);
  ASSERT_FALSE(out.has_value()) << "accepted: " << spec.source.text;
  EXPECT_NE(out.error().find(why), std::string::npos) << out.error();
}

TEST(SpecCheck, OwnAndToolchainHeadersPass) {
  const std::string src = std::string("#include \"h.h\"\n#include \"detail/d.h\"\n"
                                      "#include <cuda_bf16.h>\n# include <cstdint>\n") +
                          kKernel;
  auto out = prepare_spec(cuda(src, {"-D", "X", "-use_fast_math", "-w"}));
  ASSERT_TRUE(out.has_value()) << out.error();
  EXPECT_EQ(out->options,
            (std::vector<std::string>{"--use_fast_math", "--disable-warnings", "-DX=1"}));
}

TEST(SpecCheck, IncludesOfHostPathsAreRefused) {
  const std::vector<std::string> sources = {
      "#include \"/etc/passwd\"\n",
      "#include </etc/passwd>\n",
      "#include \"../../etc/passwd\"\n",
      "#include \"detail/../../x.h\"\n",
      "  #  include_next </etc/hostname>\n",
      "#import \"/etc/passwd\"\n",
      "#embed \"/etc/passwd\"\n",
      "%:include \"/etc/passwd\"\n",
      "?\?=include \"/etc/passwd\"\n",
      "#inc\\\nlude \"/etc/passwd\"\n",
      "#/* comment */include \"/etc/passwd\"\n",
      "#if __has_include(\"/etc/passwd\")\n#endif\n",
      "#if __has_include(</etc/shadow>)\n#endif\n",
      "#define P </etc/passwd>\n#if __has_include(P)\n#endif\n",
  };
  for (const std::string& s : sources) {
    SCOPED_TRACE(s);
    expect_refused(cuda(s + kKernel), "");
    expect_refused(cpp(s), "");
  }
}

TEST(SpecCheck, ComputedIncludesAreRefused) {
  expect_refused(cuda("#define F \"/etc/passwd\"\n#include F\n"), "computed header name");
  expect_refused(cpp("#define F(x) #x\n#include F(/etc/passwd)\n"), "computed header name");
}

TEST(SpecCheck, NoLexingTrickHidesADirective) {
  // Each of these made clang or NVRTC read a host file past an earlier scan
  // (an outside attack on kcached): the source is refused, whatever the
  // scanner thinks of comments, literals, line ends or stray bytes.
  const std::vector<std::string> sources = {
      "int x;\r#include \"/etc/passwd\"\rint y;\n",                      // CR line ends
      "\xEF\xBB\xBF#include \"/etc/passwd\"\n",                          // byte order mark
      std::string("int y;\n\0#include \"/etc/passwd\"\n", 30),           // NUL before '#'
      "int y;\n\xC2\xA0#include \"/etc/passwd\"\n",                      // U+00A0
      "#define E(a)\nE(x'/*')\n#include \"/etc/passwd\"\n// */\n",       // a char literal
      "#define E(a)\nE(1'/*')\n#include \"/etc/passwd\"\n// */\n",       // after a digit
      "const char* s = R\"a b(\";\n#include \"/etc/passwd\"\n)a b\";\n", // bad delimiter
      "const char* s = R\"x(\n#include \"/etc/passwd\"\n)x\";\n",        // C++98: no raw strings
      "/*\n*/#include \"/etc/passwd\"\n",                                // after a comment
      "x'/*'\n/**/#include \"/etc/passwd\"\n// */\n",
  };
  for (const std::string& src : sources) {
    SCOPED_TRACE(src);
    expect_refused(cpp(src), "absolute path");
  }
}

TEST(SpecCheck, CommentsAndLiteralsAreReadConservatively) {
  // A line comment never starts a directive; a block comment's lines might,
  // so a host path there is refused (the price of not trusting one lexer).
  EXPECT_TRUE(
      prepare_spec(cpp("// #include \"/etc/passwd\"\nint x = 1'000; /* ' */\n")).has_value());
  expect_refused(cpp("/*\n#include \"/etc/passwd\"\n*/\n"), "absolute path");
  // A string holding "/*" does not start a comment that hides the next line.
  expect_refused(cpp("const char* s = \"/*\";\n#include \"/etc/passwd\"\nint y; // */\n"),
                 "absolute path");
}

TEST(SpecCheck, AssemblerFileDirectivesAndDependencyPragmasAreRefused) {
  expect_refused(cpp("asm(\".incbin \\\"/etc/passwd\\\"\");\n"), ".incbin");
  expect_refused(cpp("asm(\".include \\\"/etc/passwd\\\"\");\n"), ".include");
  expect_refused(cpp("#pragma GCC dependency \"/etc/passwd\"\n"), "dependency");
  expect_refused(cpp("_Pragma(\"GCC dependency \\\"/etc/passwd\\\"\")\n"), "dependency");
  CompileSpec ir = cpp("module asm \".incbin \\\"/etc/passwd\\\"\"\n");
  ir.backend = Backend::kLlvmIr;
  ir.source.name = "k.ll";
  ir.options = {};
  expect_refused(ir, ".incbin");
}

TEST(SpecCheck, HostPathAndFileOptionsAreRefused) {
  expect_refused(cpp("", {"-I/etc"}), "host path");
  expect_refused(cpp("", {"-isystem", "/usr/include"}), "host path");
  expect_refused(cpp("", {"-include", "/etc/passwd"}), "host path");
  expect_refused(cpp("", {"@/etc/args"}), "host path");
  expect_refused(cpp("", {"-MD", "-MF", "/var/lib/kcache/CURRENT", "-MT", "x"}), "dependency file");
  expect_refused(cpp("", {"-o", "/tmp/x.o"}), "output path");
  expect_refused(cpp("", {"-Xclang", "-dependency-file"}), "write or read files");
  expect_refused(cpp("", {"-save-temps"}), "write or read files");
  expect_refused(cpp("", {"-march=native"}), "target and output");
  expect_refused(cpp("", {"-fprofile-instr-use=/etc/x"}), "host path");
  expect_refused(cpp("", {"--frobnicate"}), "unknown option");
  expect_refused(cuda(kKernel, {"-I", "/etc"}), "host path");
  expect_refused(cuda(kKernel, {"--pre-include=/etc/passwd"}), "host path");
  expect_refused(cuda(kKernel, {"--time=/tmp/t.csv"}), "write or read files");
  expect_refused(cuda(kKernel, {"-arch=sm_80"}), "target and output");
  expect_refused(cuda(kKernel, {"-Xcompiler", "-DX"}), "unknown option");
}

TEST(SpecCheck, FileNamesStayInsideTheSpec) {
  CompileSpec s = cuda(kKernel);
  s.headers.push_back({"/etc/passwd", ""});
  expect_refused(s, "absolute path");
  s = cuda(kKernel);
  s.headers.push_back({"a/../../b.h", ""});
  expect_refused(s, "..");
  s = cuda(kKernel);
  s.source.name = "../k.cu";
  expect_refused(s, "..");
  s = cuda(kKernel);
  s.headers.push_back({"h.h", "#define H 2\n"});
  expect_refused(s, "appears twice");
}

TEST(SpecCheck, TargetsAndOutputsNameTheValidValues) {
  CompileSpec s = cuda(kKernel);
  s.target = "sm_999x";
  expect_refused(s, "sm_XX");
  s.target = "compute_90a"; // a CUBIN needs a real architecture
  expect_refused(s, "real architecture");
  s = cuda(kKernel);
  s.output = OutputKind::kObject;
  expect_refused(s, "valid: cubin, ptx");
  const auto toolchain = cachekey::ToolchainFingerprint().add(
      std::string(kTargetsComponent), "sm_80 compute_80 sm_90 sm_90a compute_90");
  s = cuda(kKernel);
  s.target = "sm_999";
  auto out = prepare_spec(s, &toolchain);
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.error().find("valid: sm_80 compute_80"), std::string::npos) << out.error();
  s.target = "sm_90a";
  EXPECT_TRUE(prepare_spec(s, &toolchain).has_value());
  s = cpp("");
  s.target = "native";
  expect_refused(s, "resolved");
}

TEST(SpecCheck, PreparedSpecsKeyTheirCanonicalOptions) {
  const auto toolchain = cachekey::ToolchainFingerprint().add("nvrtc", "13.0");
  auto a = prepare_spec(cuda(kKernel, {"-DX", "-UX"}));
  auto b = prepare_spec(cuda(kKernel, {"-UX", "-DX"}));
  ASSERT_TRUE(a && b);
  EXPECT_NE(compile_key(*a, toolchain), compile_key(*b, toolchain));
  // Spellings and define order are one key; a warning flag is not (clang's
  // -Wno-deprecated changes a macro).
  auto spelled = prepare_spec(cuda(kKernel, {"-D", "X", "-use_fast_math"}));
  auto plain = prepare_spec(cuda(kKernel, {"--use_fast_math", "-DX=1"}));
  auto quiet = prepare_spec(cuda(kKernel, {"-w", "-DX"}));
  ASSERT_TRUE(spelled && plain && quiet);
  EXPECT_EQ(compile_key(*spelled, toolchain), compile_key(*plain, toolchain));
  EXPECT_NE(compile_key(*quiet, toolchain), compile_key(*plain, toolchain));
}

} // namespace
} // namespace kcache::compiler
