#include <kcache/compiler/compile_spec.h>
#include <kcache/compiler/cubin.h>

#include <gtest/gtest.h>

namespace kcache::compiler {
namespace {

CompileSpec base() {
  CompileSpec s;
  s.source = {"k.cu", "__global__ void k() {}"};
  s.headers = {{"h.h", "#define X 1"}};
  s.name_expressions = {"k"};
  s.options = {"--use_fast_math", "-DA=1"};
  s.target = "sm_90a";
  return s;
}

const cachekey::ToolchainFingerprint kToolchain =
    cachekey::ToolchainFingerprint().add("nvrtc", "13.0");

TEST(CompileSpec, JsonRoundTrip) {
  CompileSpec s = base();
  s.backend = Backend::kLlvmIr;
  s.output = OutputKind::kObject;
  auto back = spec_from_json(spec_to_json(s));
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(*back, s);
  EXPECT_FALSE(spec_from_json("{}").has_value());
  EXPECT_FALSE(
      spec_from_json(R"({"backend":"fortran","source":{"name":"a","text":""}})").has_value());
  EXPECT_FALSE(
      spec_from_json(R"({"backend":"cuda","source":{"name":"a","text":""},"output":"exe"})")
          .has_value());
  EXPECT_FALSE(spec_from_json("[").has_value());
}

TEST(CompileSpec, KeyChangesWithEverythingThatDecidesTheBinary) {
  const auto key = compile_key(base(), kToolchain);
  EXPECT_EQ(compile_key(base(), kToolchain), key);
  std::vector<CompileSpec> variants(8, base());
  variants[0].source.text += " ";
  variants[1].headers[0].text = "#define X 2";
  variants[2].name_expressions = {"k2"};
  variants[3].options = {"-DA=2"};
  variants[4].target = "sm_80";
  variants[5].output = OutputKind::kPtx;
  variants[6].backend = Backend::kPtx;
  variants[7].headers[0].name = "other.h";
  for (std::size_t i = 0; i < variants.size(); ++i) {
    EXPECT_NE(compile_key(variants[i], kToolchain), key) << "variant " << i;
  }
  EXPECT_NE(compile_key(base(), cachekey::ToolchainFingerprint().add("nvrtc", "13.1")), key);
  // Spellings and the order of independent defines do not change the key
  // (NVRTC's flags: the cuda backend's family).
  CompileSpec same = base();
  same.options = {"-DA=1", "-use_fast_math"};
  EXPECT_EQ(compile_key(same, kToolchain), key);
}

TEST(Cubin, TargetsAndHeaders) {
  EXPECT_EQ(sm_of_target("sm_90a"), 90);
  EXPECT_EQ(sm_of_target("compute_100"), 100);
  EXPECT_EQ(sm_of_target("x86-64"), std::nullopt);
  EXPECT_EQ(sm_of_target("sm_"), std::nullopt);
  EXPECT_FALSE(inspect_cubin("not an elf").has_value());
  std::string elf(64, '\0');
  elf.replace(0, 4,
              "\x7f"
              "ELF");
  elf[4] = 2;
  elf[8] = 8;
  elf[18] = 62; // EM_X86_64: an ELF, but no CUBIN
  EXPECT_FALSE(inspect_cubin(elf).has_value());
  elf[18] = static_cast<char>(190);
  elf[49] = 0x5a; // ABI v8 keeps the SM in bits 8-15
  ASSERT_TRUE(inspect_cubin(elf).has_value());
  EXPECT_EQ(inspect_cubin(elf)->sm, 90);
}

} // namespace
} // namespace kcache::compiler

namespace kcache::compiler {
namespace {

// A member the parser does not know is refused with its likely meaning, never
// dropped: "opitons" would otherwise compile without the options asked for.
TEST(CompileSpec, UnknownFieldsAreRefusedWithTheirLikelyMeaning) {
  auto typo =
      spec_from_json(R"({"backend":"cpp","source":{"name":"a.cpp","text":""},"opitons":["-O3"]})");
  ASSERT_FALSE(typo.has_value());
  EXPECT_NE(typo.error().find("unknown field 'opitons'"), std::string::npos) << typo.error();
  EXPECT_NE(typo.error().find("did you mean 'options'"), std::string::npos) << typo.error();

  auto in_source = spec_from_json(R"({"backend":"cpp","source":{"name":"a.cpp","txt":""}})");
  ASSERT_FALSE(in_source.has_value());
  EXPECT_NE(in_source.error().find("source: unknown field 'txt'"), std::string::npos)
      << in_source.error();

  auto in_header = spec_from_json(R"({"backend":"cpp","source":{"name":"a.cpp","text":""},)"
                                  R"("headers":[{"name":"h.h","text":"","mode":1}]})");
  ASSERT_FALSE(in_header.has_value());
  EXPECT_NE(in_header.error().find("unknown field 'mode'"), std::string::npos) << in_header.error();
}

} // namespace
} // namespace kcache::compiler
