// The options part of the key-sensitivity matrix: pairs of flag lists that
// must key differently (the compiler would see something else) or the same
// (the compiler provably sees the same thing), per compiler family. A failing
// case prints both normalized lists.

#include <kcache/cachekey/compiler_flags.h>
#include <kcache/cachekey/options.h>

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace kcache::cachekey {
namespace {

using Args = std::vector<std::string>;

struct FlagCase {
  const char* name;
  FlagFamily family;
  Args a;
  Args b;
  bool same_key;
};

std::string show(const Args& args) {
  std::string out;
  for (const std::string& a : args) {
    out += (out.empty() ? "" : " ") + a;
  }
  return "[" + out + "]";
}

Args key_of(FlagFamily family, const Args& args) {
  if (family == FlagFamily::kGeneric) {
    return normalize_options(args);
  }
  auto out = normalize_options(family, args);
  EXPECT_TRUE(out.has_value()) << show(args) << ": " << out.error().message;
  return out ? *out : Args{"<error>"};
}

constexpr auto G = FlagFamily::kGeneric;
constexpr auto N = FlagFamily::kNvrtc;
constexpr auto C = FlagFamily::kClang;

const std::vector<FlagCase>& flag_cases() {
  static const std::vector<FlagCase> all = {
      // --- macros resolve to the final table: last wins, -U in sequence ---
      {"define_then_undef_vs_undef_then_define", G, {"-DX", "-UX"}, {"-UX", "-DX"}, false},
      {"define_then_undef_nvrtc", N, {"-DX", "-UX"}, {"-UX", "-DX"}, false},
      {"define_then_undef_clang", C, {"-DX", "-UX"}, {"-UX", "-DX"}, false},
      {"undef_is_not_nothing", G, {"-UX"}, {}, false},
      {"define_undef_equals_undef", G, {"-DX=2", "-UX"}, {"-UX"}, true},
      {"undef_define_equals_define", G, {"-UX", "-DX=2"}, {"-DX=2"}, true},
      {"last_define_wins", G, {"-DX=1", "-DX=2"}, {"-DX=2"}, true},
      {"last_define_wins_not_first", G, {"-DX=1", "-DX=2"}, {"-DX=1"}, false},
      {"long_define_order_kept",
       N,
       {"--define-macro=X=1", "-DX=2"},
       {"-DX=2", "--define-macro=X=1"},
       false},
      {"long_define_is_a_define", N, {"--define-macro=X=1"}, {"-DX=1"}, true},
      {"separate_define_is_a_define", N, {"-D", "X=1"}, {"-DX=1"}, true},
      {"long_separate_define", N, {"--define-macro", "X=1"}, {"-DX=1"}, true},
      {"long_undefine", N, {"-DX", "--undefine-macro=X"}, {"-UX"}, true},
      {"function_like_macros_differ", G, {"-DX(a)=a"}, {"-DX(b)=a"}, false},
      {"function_like_vs_object_like", G, {"-DX(a)=a"}, {"-DX=a"}, false},
      {"function_like_redefined", G, {"-DX(a)=a", "-DX=3"}, {"-DX=3"}, true},
      {"define_without_value_is_one", G, {"-DX"}, {"-DX=1"}, true},
      {"define_empty_is_not_one", G, {"-DX="}, {"-DX=1"}, false},
      {"independent_defines_commute", G, {"-DA=1", "-DB=2"}, {"-DB=2", "-DA=1"}, true},
      {"define_value_differs", G, {"-DBLOCK=128"}, {"-DBLOCK=256"}, false},
      {"nvcc_comma_define_kept_in_place", G, {"-DA=1,B=3", "-DB=2"}, {"-DB=2", "-DA=1,B=3"}, false},
      // --- flags with arguments: the argument never becomes a flag ---
      {"xptxas_argument_not_dropped", G, {"-Xptxas", "-v", "-O0"}, {"-Xptxas", "-O0"}, false},
      {"xptxas_nvrtc_argument", N, {"-Xptxas", "-O0"}, {"-Xptxas", "-O3"}, false},
      {"xptxas_spellings_match", N, {"-Xptxas", "-O0"}, {"--ptxas-options=-O0"}, true},
      {"xcompiler_define_is_host_only", G, {"-Xcompiler", "-DX"}, {"-DX"}, false},
      {"xcompiler_define_not_reordered",
       G,
       {"-Xcompiler", "-DX", "-DA"},
       {"-DA", "-Xcompiler", "-DX"},
       true},
      {"xlinker_argument_kept", G, {"-Xlinker", "-s"}, {}, false},
      {"clang_w_keyed", C, {"-O2"}, {"-O2", "-w"}, false},
      // An option that takes the next argument keeps it: "-Wall" is its value.
      {"trapv_handler_argument",
       G,
       {"-ftrapv-handler", "-Wall"},
       {"-ftrapv-handler", "-Wextra"},
       false},
      {"gen_flag_is_not_debug_info",
       G,
       {"-gen-cdb-fragment-path", "a", "-O2"},
       {"-gen-cdb-fragment-path", "b", "-O2"},
       false},
      {"unknown_flag_argument_stays",
       G,
       {"-Zunknown", "-DX", "-DY"},
       {"-Zunknown", "-DY", "-DX"},
       false},
      {"unknown_generic_flag_kept", G, {"--frobnicate"}, {}, false},
      // --- path mapping changes __FILE__ ---
      {"file_prefix_map_kept", G, {"-ffile-prefix-map=/a=/b"}, {}, false},
      {"debug_prefix_map_kept", C, {"-fdebug-prefix-map=/a=/b"}, {}, false},
      {"macro_prefix_map_differs",
       C,
       {"-fmacro-prefix-map=/a=x"},
       {"-fmacro-prefix-map=/a=y"},
       false},
      // --- include paths are kept in client keys ---
      {"include_dirs_differ", G, {"-I", "dirA"}, {"-I", "dirB"}, false},
      {"include_spellings_match", G, {"-I", "dirA"}, {"-IdirA"}, true},
      // --- diagnostics never change a successful output ---
      {"werror_keyed", G, {"-O2", "-Werror"}, {"-O2"}, false},
      {"warnings_keyed", C, {"-Wall", "-Wextra", "-O2"}, {"-O2"}, false},
      // clang undefines __DEPRECATED under -Wno-deprecated: no warning flag is
      // provably diagnostics-only.
      {"wno_deprecated_changes_a_macro", C, {"-Wno-deprecated"}, {}, false},
      {"nvrtc_disable_warnings_keyed", N, {"-w"}, {}, false},
      {"nvrtc_disable_warnings_spellings", N, {"-w"}, {"--disable-warnings"}, true},
      {"nvrtc_diag_suppress_keyed", N, {"--diag-suppress=177"}, {}, false},
      {"wl_is_not_a_warning", G, {"-Wl,-z,now"}, {}, false},
      {"wa_is_not_a_warning", G, {"-Wa,--noexecstack"}, {}, false},
      {"wp_is_not_a_warning", G, {"-Wp,-DX"}, {}, false},
      {"output_path_dropped", G, {"-o", "a.o", "-O2"}, {"-O2", "-o", "b.o"}, true},
      {"dependency_files_dropped", G, {"-MD", "-MF", "a.d", "-O2"}, {"-O2"}, true},
      // --- spellings ---
      {"fast_math_spellings", N, {"-use_fast_math"}, {"--use_fast_math"}, true},
      {"fast_math_generic_spellings", G, {"-use_fast_math"}, {"--use_fast_math"}, true},
      {"std_spellings", N, {"-std=c++17"}, {"--std=c++17"}, true},
      {"std_differs", N, {"--std=c++17"}, {"--std=c++20"}, false},
      {"line_info_spellings", N, {"-lineinfo"}, {"--generate-line-info"}, true},
      {"maxrreg_separate_and_joined", N, {"-maxrregcount", "64"}, {"--maxrregcount=64"}, true},
      {"maxrreg_differs", N, {"--maxrregcount=64"}, {"--maxrregcount=32"}, false},
      {"ftz_differs", N, {"--ftz=true"}, {"--ftz=false"}, false},
      {"fmad_order_kept",
       N,
       {"--fmad=true", "--fmad=false"},
       {"--fmad=false", "--fmad=true"},
       false},
      {"opt_level_differs", C, {"-O2"}, {"-O3"}, false},
      {"opt_order_kept", C, {"-O2", "-O3"}, {"-O3", "-O2"}, false},
      {"fast_math_clang", C, {"-O2", "-ffast-math"}, {"-O2"}, false},
      {"mattr_differs", C, {"-mattr=+avx2"}, {"-mattr=-avx2"}, false},
      {"device_debug", N, {"-G"}, {}, false},
      {"rdc_differs", N, {"-rdc=true"}, {"-rdc=false"}, false},
  };
  return all;
}

class FlagsKeyExactlyWhenTheCompilerSeesADifference : public ::testing::TestWithParam<std::size_t> {
};

TEST_P(FlagsKeyExactlyWhenTheCompilerSeesADifference, Case) {
  const FlagCase& c = flag_cases()[GetParam()];
  const Args a = key_of(c.family, c.a);
  const Args b = key_of(c.family, c.b);
  EXPECT_EQ(options_digest(a) == options_digest(b), c.same_key)
      << c.name << " (" << family_name(c.family) << "): " << show(c.a) << " -> " << show(a)
      << " vs " << show(c.b) << " -> " << show(b);
}

INSTANTIATE_TEST_SUITE_P(Matrix, FlagsKeyExactlyWhenTheCompilerSeesADifference,
                         ::testing::Range<std::size_t>(0, flag_cases().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& param) {
                           return std::string(flag_cases()[param.param].name);
                         });

TEST(CompilerFlags, UnknownFlagsAreErrorsForCompilerFamilies) {
  EXPECT_FALSE(parse_flags(FlagFamily::kNvrtc, Args{"--frobnicate"}).has_value());
  EXPECT_FALSE(parse_flags(FlagFamily::kNvrtc, Args{"-Xcompiler", "-DX"}).has_value());
  EXPECT_FALSE(parse_flags(FlagFamily::kClang, Args{"--frobnicate"}).has_value());
  EXPECT_FALSE(parse_flags(FlagFamily::kNvrtc, Args{"-D"}).has_value()) << "missing value";
  EXPECT_FALSE(parse_flags(FlagFamily::kClang, Args{"-D", "1X"}).has_value()) << "bad name";
  EXPECT_FALSE(parse_flags(FlagFamily::kClang, Args{"-ftrapv-handler", "-Wall"}).has_value())
      << "takes an argument kcache does not check";
  EXPECT_FALSE(parse_flags(FlagFamily::kClang, Args{"-gen-reproducer"}).has_value())
      << "not a debug-info level";
}

TEST(CompilerFlags, RolesOfHostPathAndFileFlags) {
  auto role_of = [](FlagFamily family, Args args) {
    auto parsed = parse_flags(family, args);
    EXPECT_TRUE(parsed.has_value()) << show(args);
    return parsed && !parsed->empty() ? parsed->front().role : FlagRole::kUnknown;
  };
  EXPECT_EQ(role_of(FlagFamily::kClang, {"-I/etc"}), FlagRole::kHostPath);
  EXPECT_EQ(role_of(FlagFamily::kClang, {"-include", "x.h"}), FlagRole::kHostPath);
  EXPECT_EQ(role_of(FlagFamily::kClang, {"@args.rsp"}), FlagRole::kHostPath);
  EXPECT_EQ(role_of(FlagFamily::kClang, {"-MF", "/tmp/x"}), FlagRole::kDependencyOutput);
  EXPECT_EQ(role_of(FlagFamily::kClang, {"-fprofile-instr-use=/x"}), FlagRole::kHostPath);
  EXPECT_EQ(role_of(FlagFamily::kClang, {"-Xclang", "-dependency-file"}), FlagRole::kWritesFile);
  EXPECT_EQ(role_of(FlagFamily::kClang, {"-march=znver4"}), FlagRole::kSetByKcache);
  EXPECT_EQ(role_of(FlagFamily::kNvrtc, {"--time=/tmp/t.csv"}), FlagRole::kWritesFile);
  EXPECT_EQ(role_of(FlagFamily::kNvrtc, {"-I", "/etc"}), FlagRole::kHostPath);
  EXPECT_EQ(role_of(FlagFamily::kNvrtc, {"-arch=sm_90"}), FlagRole::kSetByKcache);
  EXPECT_EQ(role_of(FlagFamily::kNvrtc, {"--pch"}), FlagRole::kWritesFile);
  EXPECT_EQ(role_of(FlagFamily::kClang, {"-mllvm=-stats"}), FlagRole::kWritesFile);
  EXPECT_EQ(role_of(FlagFamily::kClang, {"-g3"}), FlagRole::kCodegen);
}

TEST(CompilerFlags, RenderingIsIdempotent) {
  const Args flags = {"-D", "X", "-Xptxas", "-v", "-use_fast_math", "-UY", "-w", "-std=c++17"};
  auto once = parse_flags(FlagFamily::kNvrtc, flags);
  ASSERT_TRUE(once.has_value());
  const Args rendered = render_flags(*once, /*for_key=*/false);
  auto twice = parse_flags(FlagFamily::kNvrtc, rendered);
  ASSERT_TRUE(twice.has_value());
  EXPECT_EQ(render_flags(*twice, false), rendered);
  EXPECT_EQ(rendered, (Args{"--ptxas-options=-v", "--use_fast_math", "--disable-warnings",
                            "--std=c++17", "-DX=1", "-UY"}));
}

// What kcached renders, the worker parses again: rendering must be a fixed
// point for any argument list (found: "-target" X, "-I" "=", "-x" "", and by
// parsers_fuzzer "--include" "", whose canonical name is another row's alias).
TEST(CompilerFlags, RenderingIsAFixedPointForRandomArguments) {
  const std::vector<std::string> pool = {"-D",
                                         "-U",
                                         "-DX",
                                         "-UX",
                                         "X",
                                         "X=1",
                                         "-Xptxas",
                                         "-O0",
                                         "-I",
                                         "/x",
                                         "-o",
                                         "a",
                                         "-MF",
                                         "-std",
                                         "c++17",
                                         "--std=c++17",
                                         "-w",
                                         "-target",
                                         "-x",
                                         "cu",
                                         "-mllvm",
                                         "-g3",
                                         "-ftrapv-handler",
                                         "-Wall",
                                         "=",
                                         "",
                                         "-",
                                         "--",
                                         "-DF(a)=a",
                                         "-DA,B=1",
                                         "--define-macro",
                                         "@f",
                                         "-Zfoo",
                                         "-fno-x",
                                         "-mavx2",
                                         "--ptxas-options",
                                         "-gen-reproducer",
                                         "--include",
                                         "-include",
                                         "--pre-include"};
  std::mt19937 rng(11);
  for (int round = 0; round < 4000; ++round) {
    Args args(rng() % 6);
    for (std::string& a : args) {
      a = pool[rng() % pool.size()];
    }
    for (FlagFamily family : {FlagFamily::kGeneric, FlagFamily::kNvrtc, FlagFamily::kClang}) {
      auto parsed = parse_flags(family, args);
      ASSERT_TRUE(parsed || family != FlagFamily::kGeneric) << show(args);
      if (!parsed) {
        continue;
      }
      const Args rendered = render_flags(*parsed, /*for_key=*/false);
      auto again = parse_flags(family, rendered);
      ASSERT_TRUE(again.has_value()) << show(args) << " -> " << show(rendered);
      ASSERT_EQ(render_flags(*again, false), rendered) << show(args);
    }
  }
}

} // namespace
} // namespace kcache::cachekey
