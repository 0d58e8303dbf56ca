// examples/specs/*.json parse and pass the submit-time checks (the CUDA ones
// are only validated here; client/python/tests/test_spec_examples.py compiles
// the CPU ones through a real kcached), and a spec's errors name the valid
// values of the field that is wrong (issue 17 part 7).

#include <kcache/compiler/autotune_spec.h>
#include <kcache/compiler/compile_spec.h>
#include <kcache/compiler/expression.h>
#include <kcache/compiler/spec_check.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace kcache::compiler {
namespace {

namespace fs = std::filesystem;

// KCACHE_TEST_DATA_DIR is tests/data; the examples live beside tests/.
const fs::path kExamples = fs::path(KCACHE_TEST_DATA_DIR) / ".." / ".." / "examples" / "specs";

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<fs::path> examples() {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(kExamples)) {
    if (entry.path().extension() == ".json") {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SpecExamples, EveryExampleParsesAndPassesTheChecks) {
  const auto files = examples();
  ASSERT_FALSE(files.empty()) << kExamples;
  std::set<std::string> kinds; // backend/output, and autotune/backend
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    const std::string text = read(file);
    auto spec = spec_from_json(text);
    ASSERT_TRUE(spec.has_value()) << spec.error();
    auto prepared = prepare_spec(*spec);
    ASSERT_TRUE(prepared.has_value()) << prepared.error();
    const auto doc = nlohmann::json::parse(text);
    if (!doc.contains("autotune")) {
      kinds.insert(std::string(backend_name(spec->backend)) + "/" +
                   std::string(output_name(spec->output)));
      continue;
    }
    kinds.insert("autotune/" + std::string(backend_name(spec->backend)));
    auto search = parse_autotune(doc["autotune"].dump());
    ASSERT_TRUE(search.has_value()) << search.error();
    auto space = expand(*search);
    ASSERT_TRUE(space.has_value()) << space.error();
    EXPECT_FALSE(space->variants.empty());
    for (const Variant& v : space->variants) {
      auto variant = prepare_spec(variant_spec(*spec, v));
      EXPECT_TRUE(variant.has_value()) << v.id << ": " << variant.error();
    }
    auto reference = prepare_spec(variant_spec(*spec, {search->benchmark.reference, "reference"}));
    EXPECT_TRUE(reference.has_value()) << reference.error();
  }
  // One example of every kind docs/SPECS.md shows.
  for (const char* kind :
       {"cpp/shared", "cpp/object", "llvm-ir/shared", "llvm-ir/ptx", "cuda/cubin", "cuda/ptx",
        "ptx/cubin", "autotune/cpp", "autotune/cuda"}) {
    EXPECT_TRUE(kinds.contains(kind)) << "no example of " << kind;
  }
}

std::string spec_error(const std::string& text) {
  auto spec = spec_from_json(text);
  return spec ? std::string("(parsed)") : spec.error();
}

TEST(SpecErrors, EnumFieldsNameTheirValidValues) {
  EXPECT_EQ(spec_error(R"({"backend": "nvcc", "source": {"name": "k.cu", "text": ""}})"),
            "unknown backend 'nvcc' (valid: cuda, ptx, llvm-ir, cpp)");
  EXPECT_EQ(spec_error(R"({"backend": "cuda", "source": {"name": "k.cu", "text": ""},)"
                       R"( "output": "fatbin"})"),
            "unknown output 'fatbin' (valid: cubin, ptx, object, shared)");
  CompileSpec ir;
  ir.backend = Backend::kLlvmIr;
  ir.source = {"k.ll", ""};
  ir.output = OutputKind::kObject;
  ir.options = {"-O4"};
  auto refused = prepare_spec(ir);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("(valid: -O0 -O1 -O2 -O3 -ffast-math -mattr=...)"),
            std::string::npos)
      << refused.error();
}

TEST(SpecErrors, MissingOrMistypedFieldsAreNamed) {
  EXPECT_EQ(spec_error(R"({"source": {"name": "k.cu", "text": ""}})"),
            "compile spec: 'backend' is missing (valid: cuda, ptx, llvm-ir, cpp)");
  EXPECT_EQ(spec_error(R"({"backend": 3, "source": {"name": "k.cu", "text": ""}})"),
            "compile spec: 'backend' must be a string (valid: cuda, ptx, llvm-ir, cpp)");
  EXPECT_NE(spec_error(R"({"backend": "cuda"})").find("'source' is missing"), std::string::npos);
  EXPECT_NE(spec_error(R"({"backend": "cuda", "source": "k.cu"})").find("'source' must be"),
            std::string::npos);
  EXPECT_EQ(spec_error(R"({"backend": "cuda", "source": {"name": "k.cu", "text": ""},)"
                       R"( "options": "-O3"})"),
            "compile spec: 'options' must be a list of strings");
  EXPECT_NE(spec_error(R"({"backend": "cuda", "source": {"name": "k.cu", "text": ""},)"
                       R"( "headers": [{"name": "h.h"}]})")
                .find("'headers' must be a list of"),
            std::string::npos);
  EXPECT_NE(spec_error(R"({"backend": "cpp", "source": {"name": "k.cpp", "text": ""},)"
                       R"( "output": 1})")
                .find("'output' must be a string (valid: cubin, ptx, object, shared)"),
            std::string::npos);
}

std::string search_error(const nlohmann::json& search) {
  auto parsed = parse_autotune(search.dump());
  return parsed ? std::string("(parsed)") : parsed.error();
}

TEST(SpecErrors, AutotuneFieldsNameTheirValidValues) {
  const auto search = nlohmann::json::parse(R"({
    "params": {"U": [1, 2]},
    "benchmark": {"args": [{"buffer": "y", "count": "4", "output": true}]}})");
  ASSERT_EQ(search_error(search), "(parsed)");
  auto bad = search;
  bad["strategy"] = {{"kind", "bayesian"}};
  EXPECT_EQ(search_error(bad),
            "autotune: unknown strategy 'bayesian' (valid: exhaustive, random, halving)");
  bad = search;
  bad["benchmark"]["args"][0]["dtype"] = "fp8";
  EXPECT_EQ(search_error(bad),
            "autotune: unknown dtype 'fp8' (valid: f32, f64, i32, i64, bf16, f16)");
  bad = search;
  bad.erase("params");
  EXPECT_NE(search_error(bad).find("'params' must be an object"), std::string::npos);
  bad = search;
  bad["benchmark"].erase("args");
  EXPECT_NE(search_error(bad).find("'benchmark' must be an object with an \"args\" list"),
            std::string::npos);
  auto expression = Expression::parse("floor(BM / 2)");
  ASSERT_FALSE(expression.has_value());
  EXPECT_NE(expression.error().find("(valid: min, max, ceil_div)"), std::string::npos)
      << expression.error();
}

} // namespace
} // namespace kcache::compiler
