#include "compiler_flag_tables.h"

#include <algorithm>
#include <array>

namespace kcache::cachekey::flags {
namespace {

using enum ArgForm;
using enum FlagRole;

// NVRTC's options (CUDA 13 NVRTC guide, "Supported Compile Options"). NVRTC
// takes "--name=value" and "-short value"; kcache renders the long form.
constexpr std::array kNvrtc = std::to_array<FlagSpec>({
    {"-D", "--define-macro", kJoinedOrSeparate, kMacro},
    {"-U", "--undefine-macro", kJoinedOrSeparate, kMacro},
    {"--include-path", "-I", kJoinedOrSeparate, kHostPath},
    {"--pre-include", "-include", kJoinedOrSeparate, kHostPath},
    {"--use-pch", "-use-pch", kEquals, kHostPath},
    {"--pch-dir", "-pch-dir", kEquals, kWritesFile},
    {"--create-pch", "-create-pch", kEquals, kWritesFile},
    {"--pch", "-pch", kNone, kWritesFile},
    {"--time", "-time", kEquals, kWritesFile},
    {"--fdevice-time-trace", "-fdevice-time-trace", kEquals, kWritesFile},
    {"--fdevice-time-trace", "--device-time-trace", kEquals, kWritesFile},
    {"--gpu-architecture", "-arch", kEquals, kSetByKcache},
    {"--optix-ir", "-optix-ir", kNone, kSetByKcache},
    {"--optix-ir", "--emit-optix-ir", kNone, kSetByKcache},
    {"--device-debug", "-G", kNone, kCodegen},
    {"--generate-line-info", "-lineinfo", kNone, kCodegen},
    {"--use_fast_math", "-use_fast_math", kNone, kCodegen},
    {"-default-device", "--device-as-default-execution-space", kNone, kCodegen},
    {"--restrict", "-restrict", kNone, kCodegen},
    {"--device-c", "-dc", kNone, kCodegen},
    {"--device-w", "-dw", kNone, kCodegen},
    {"--relocatable-device-code", "-rdc", kEquals, kCodegen},
    {"--extensible-whole-program", "-ewp", kNone, kCodegen},
    {"--dlink-time-opt", "-dlto", kNone, kCodegen},
    {"--gen-opt-lto", "", kNone, kCodegen},
    {"--extra-device-vectorization", "-extra-device-vectorization", kNone, kCodegen},
    {"--device-int128", "", kNone, kCodegen},
    {"--device-float128", "", kNone, kCodegen},
    {"--no-source-include", "-no-source-include", kNone, kCodegen},
    {"--minimal", "-minimal", kNone, kCodegen},
    {"--fdevice-syntax-only", "", kNone, kCodegen},
    {"--maxrregcount", "-maxrregcount", kEquals, kCodegen},
    {"--ftz", "-ftz", kEquals, kCodegen},
    {"--prec-sqrt", "-prec-sqrt", kEquals, kCodegen},
    {"--prec-div", "-prec-div", kEquals, kCodegen},
    {"--fmad", "-fmad", kEquals, kCodegen},
    {"--std", "-std", kEquals, kCodegen},
    {"--dopt", "-dopt", kEquals, kCodegen},
    {"--ptxas-options", "-Xptxas", kEquals, kCodegen},
    {"--jump-table-density", "", kEquals, kCodegen},
    {"--modify-stack-limit", "", kEquals, kCodegen},
    {"--split-compile", "-split-compile", kEquals, kCodegen},
    {"--Ofast-compile", "-Ofc", kEquals, kCodegen},
    {"--frandom-seed", "", kEquals, kCodegen},
    {"--builtin-move-forward", "", kEquals, kCodegen},
    {"--builtin-initializer-list", "", kEquals, kCodegen},
    {"--device-stack-protector", "", kEquals, kCodegen},
    {"--disable-warnings", "-w", kNone, kDiagnostic},
    {"--diag-error", "-diag-error", kEquals, kDiagnostic},
    {"--diag-suppress", "-diag-suppress", kEquals, kDiagnostic},
    {"--diag-warn", "-diag-warn", kEquals, kDiagnostic},
    {"--brief-diagnostics", "-brief-diag", kEquals, kDiagnostic},
    {"--display-error-number", "-err-no", kNone, kDiagnostic},
    {"--no-display-error-number", "-no-err-no", kNone, kDiagnostic},
    {"--optimization-info", "-opt-info", kEquals, kDiagnostic},
});

// The clang driver's options that a kernel compile uses, plus every option
// that reads or writes a host path or changes what is produced (refused in a
// spec). Options described by a rule (-W, -f, -m) are in rule_role().
constexpr std::array kClang = std::to_array<FlagSpec>({
    {"-D", "--define-macro", kJoinedOrSeparate, kMacro},
    {"-U", "--undefine-macro", kJoinedOrSeparate, kMacro},
    {"-I", "--include-directory", kJoinedOrSeparate, kHostPath},
    {"-isystem-after", "", kJoinedOrSeparate, kHostPath},
    {"-isystem", "", kJoinedOrSeparate, kHostPath},
    {"-isysroot", "", kJoinedOrSeparate, kHostPath},
    {"-iquote", "", kJoinedOrSeparate, kHostPath},
    {"-idirafter", "", kJoinedOrSeparate, kHostPath},
    {"-iprefix", "", kJoinedOrSeparate, kHostPath},
    {"-iwithprefixbefore", "", kJoinedOrSeparate, kHostPath},
    {"-iwithprefix", "", kJoinedOrSeparate, kHostPath},
    {"-iwithsysroot", "", kJoinedOrSeparate, kHostPath},
    {"-iframework", "", kJoinedOrSeparate, kHostPath},
    {"-cxx-isystem", "", kJoinedOrSeparate, kHostPath},
    {"-include-pch", "", kJoinedOrSeparate, kHostPath},
    {"-include", "--include", kJoinedOrSeparate, kHostPath},
    {"-imacros", "", kJoinedOrSeparate, kHostPath},
    {"--sysroot", "", kEquals, kHostPath},
    {"--gcc-toolchain", "", kEquals, kHostPath},
    {"--gcc-install-dir", "", kEquals, kHostPath},
    {"-resource-dir", "", kEquals, kHostPath},
    {"--config", "", kEquals, kHostPath},
    {"-L", "", kJoinedOrSeparate, kHostPath},
    {"-F", "", kJoinedOrSeparate, kHostPath},
    {"-B", "", kJoinedOrSeparate, kHostPath},
    {"-Xclang", "", kSeparate, kWritesFile},
    {"-Xlinker", "", kSeparate, kWritesFile},
    {"-Xassembler", "", kSeparate, kWritesFile},
    {"-Xpreprocessor", "", kSeparate, kWritesFile},
    {"-Xanalyzer", "", kSeparate, kWritesFile},
    {"-mllvm", "", kSeparate, kWritesFile},
    {"-save-temps", "", kJoined, kWritesFile},
    {"-gsplit-dwarf", "", kJoined, kWritesFile},
    {"-MF", "", kJoinedOrSeparate, kDependencyOutput},
    {"-MT", "", kJoinedOrSeparate, kDependencyOutput},
    {"-MQ", "", kJoinedOrSeparate, kDependencyOutput},
    {"-MJ", "", kJoinedOrSeparate, kDependencyOutput},
    {"-MMD", "", kNone, kDependencyOutput},
    {"-MD", "", kNone, kDependencyOutput},
    {"-MP", "", kNone, kDependencyOutput},
    {"-MG", "", kNone, kDependencyOutput},
    {"-MM", "", kNone, kSetByKcache},
    {"-M", "", kNone, kSetByKcache},
    {"-o", "", kJoinedOrSeparate, kOutputPath},
    {"--target", "", kEquals, kSetByKcache},
    {"-target", "", kSeparate, kSetByKcache},
    {"-march", "", kEquals, kSetByKcache},
    {"-mcpu", "", kEquals, kSetByKcache},
    {"-x", "", kJoinedOrSeparate, kSetByKcache},
    {"-c", "", kNone, kSetByKcache},
    {"-S", "", kNone, kSetByKcache},
    {"-E", "", kNone, kSetByKcache},
    {"-emit-llvm", "", kNone, kSetByKcache},
    {"-shared", "", kNone, kSetByKcache},
    {"-static", "", kNone, kSetByKcache},
    {"-###", "", kNone, kSetByKcache},
    {"-std", "--std", kEquals, kCodegen},
    {"-stdlib", "", kEquals, kCodegen},
    {"-O", "", kJoined, kCodegen},
    {"-pthread", "", kNone, kCodegen},
    {"-ansi", "", kNone, kCodegen},
    {"-trigraphs", "", kNone, kCodegen},
    {"-nostdinc++", "", kNone, kCodegen},
    {"-nostdlibinc", "", kNone, kCodegen},
    {"-nobuiltininc", "", kNone, kCodegen},
    {"-nostdinc", "", kNone, kCodegen},
    {"-pedantic-errors", "", kNone, kDiagnostic},
    {"-pedantic", "", kNone, kDiagnostic},
    {"-w", "", kNone, kDiagnostic},
    {"-v", "", kNone, kDiagnostic},
    {"-H", "", kNone, kDiagnostic},
});

// nvcc's flags that take an argument, for client keys of nvcc command lines:
// their argument is never read as a flag of its own ("-Xcompiler -DX").
constexpr std::array kNvccExtra = std::to_array<FlagSpec>({
    {"--compiler-options", "-Xcompiler", kEquals, kCodegen},
    {"--linker-options", "-Xlinker", kEquals, kCodegen},
    {"--nvlink-options", "-Xnvlink", kEquals, kCodegen},
    {"--archive-options", "-Xarchive", kEquals, kCodegen},
    {"--compiler-bindir", "-ccbin", kEquals, kCodegen},
    {"--generate-code", "-gencode", kEquals, kCodegen},
    {"--gpu-code", "-code", kEquals, kCodegen},
    {"--output-directory", "-odir", kEquals, kOutputPath},
    {"-o", "--output-file", kEquals, kOutputPath},
    {"-MF", "--dependency-output", kEquals, kDependencyOutput},
    {"--keep-dir", "-keep-dir", kEquals, kDependencyOutput},
    {"-isystem", "--system-include", kJoinedOrSeparate, kHostPath},
    {"-L", "--library-path", kJoinedOrSeparate, kHostPath},
    {"-l", "--library", kJoinedOrSeparate, kCodegen},
});

// For client keys: nvcc/NVRTC spellings first (-G, -dc, -Xlinker take their
// nvcc meaning), then clang's.
constexpr auto kGeneric = [] {
  std::array<FlagSpec, kNvccExtra.size() + kNvrtc.size() + kClang.size()> all{};
  auto out = std::copy(kNvccExtra.begin(), kNvccExtra.end(), all.begin());
  out = std::copy(kNvrtc.begin(), kNvrtc.end(), out);
  std::copy(kClang.begin(), kClang.end(), out);
  return all;
}();

// -f flags that name or write a host file (profiles, records, traces,
// modules, plugins, lists): refused in a spec, however clang spells them.
constexpr std::array<std::string_view, 24> kFileFlagWords = {
    "profile", "coverage", "time-trace", "record",          "proc-stat",   "crash",
    "module",  "pch",      "plugin",     "ignorelist",      "blacklist",   "xray",
    "session", "offload",  "dump",       "compilation-dir", "sections=",   "file",
    "path",    "include",  "depfile",    "use-ld",          "stack-usage", "index"};
constexpr std::array<std::string_view, 3> kPrefixMaps = {
    "-fdebug-prefix-map=", "-ffile-prefix-map=", "-fmacro-prefix-map="};
constexpr std::array<std::string_view, 11> kDiagnosticF = {"-fdiagnostics-",
                                                           "-fno-diagnostics-",
                                                           "-fcolor-diagnostics",
                                                           "-fno-color-diagnostics",
                                                           "-fmessage-length=",
                                                           "-ferror-limit=",
                                                           "-ftemplate-backtrace-limit=",
                                                           "-fmacro-backtrace-limit=",
                                                           "-fcaret-diagnostics",
                                                           "-fno-caret-diagnostics",
                                                           "-fconstexpr-backtrace-limit="};

// Clang's -f/-m/-g options that take the next argument as their value (from
// clang 19's driver option table): the open-ended rules below must not read
// that argument as a flag of its own ("-ftrapv-handler -Wall").
constexpr std::array<std::string_view, 44> kClangRuleFlagsWithArgument = {
    "-fbracket-depth",
    "-fconstant-string-class",
    "-fcuda-include-gpubinary",
    "-fdebug-compilation-dir",
    "-fdiagnostics-format",
    "-fdiagnostics-show-category",
    "-ferror-limit",
    "-fexperimental-openacc-macro-override",
    "-fget-definition",
    "-filelist",
    "-filetype",
    "-fintrinsic-modules-path",
    "-fmodule-feature",
    "-fmodule-implementation-of",
    "-fmodules-user-build-path",
    "-fnew-alignment",
    "-fopenmp-host-ir-file-path",
    "-force_load",
    "-framework",
    "-ftabstop",
    "-ftrapv-handler",
    "-function-alignment",
    "-gen-cdb-fragment-path",
    "-main-file-name",
    "-mdebug-pass",
    "-meabi",
    "-mfloat-abi",
    "-mfpmath",
    "-mlimit-float-precision",
    "-mlink-bitcode-file",
    "-mlink-builtin-bitcode",
    "-mllvm",
    "-mmlir",
    "-module-dependency-dir",
    "-module-dir",
    "-module-suffix",
    "-mregparm",
    "-mrelocation-model",
    "-msmall-data-limit",
    "-mt-migrate-directory",
    "-mthread-model",
    "-mtp",
    "-multiply_defined",
    "-multiply_defined_unused"};

// Debug-info flags: -g, -g0..-g3, -ggdb, -gdwarf-N and the like. Other -g...
// options (-gen-reproducer, -gsplit-dwarf) are not debug levels.
constexpr std::array<std::string_view, 20> kDebugFlags = {"-g",
                                                          "-g0",
                                                          "-g1",
                                                          "-g2",
                                                          "-g3",
                                                          "-ggdb",
                                                          "-ggdb0",
                                                          "-ggdb1",
                                                          "-ggdb2",
                                                          "-ggdb3",
                                                          "-gdwarf",
                                                          "-gdwarf-2",
                                                          "-gdwarf-3",
                                                          "-gdwarf-4",
                                                          "-gdwarf-5",
                                                          "-gline-tables-only",
                                                          "-gline-directives-only",
                                                          "-gcolumn-info",
                                                          "-gno-column-info",
                                                          "-gfull"};

bool starts_with_any(std::string_view s, std::span<const std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](std::string_view p) { return s.starts_with(p); });
}

bool names_a_file(std::string_view token) {
  return std::any_of(kFileFlagWords.begin(), kFileFlagWords.end(),
                     [&](std::string_view w) { return token.find(w) != std::string_view::npos; });
}

std::optional<FlagRole> clang_f_role(std::string_view token) {
  if (starts_with_any(token, kPrefixMaps)) {
    return kCodegen; // they change __FILE__ and debug info: keyed, and harmless
  }
  if (starts_with_any(token, kDiagnosticF)) {
    return kDiagnostic;
  }
  return names_a_file(token) ? kHostPath : kCodegen;
}

} // namespace

std::span<const FlagSpec> table(FlagFamily family) {
  switch (family) {
  case FlagFamily::kNvrtc:
    return kNvrtc;
  case FlagFamily::kClang:
    return kClang;
  case FlagFamily::kGeneric:
    break;
  }
  return kGeneric;
}

std::optional<FlagRole> rule_role(FlagFamily family, std::string_view token) {
  if (family == FlagFamily::kNvrtc) {
    return std::nullopt; // NVRTC has no open-ended option families
  }
  if (token.starts_with("@")) {
    return kHostPath; // a response file: the compiler reads it from disk
  }
  if (token.starts_with("-W")) {
    // -Wl, -Wa and -Wp pass options to the linker, assembler and
    // preprocessor: they look like warnings but change (or write) output.
    if (token.starts_with("-Wl,") || token.starts_with("-Wa,")) {
      return family == FlagFamily::kGeneric ? kCodegen : kHostPath;
    }
    if (token.starts_with("-Wp,")) {
      return family == FlagFamily::kGeneric ? kCodegen : kWritesFile;
    }
    return kDiagnostic;
  }
  if (token.starts_with("-f") && token.size() > 2) {
    return clang_f_role(token);
  }
  if (token.starts_with("-m") && token.size() > 2) {
    // -mavx2, -mtune=..., -mattr=...; -march is in the table. "-mllvm=..."
    // passes options to LLVM, which can write files.
    if (token.starts_with("-mllvm") || names_a_file(token)) {
      return kWritesFile;
    }
    return kCodegen;
  }
  if (std::find(kDebugFlags.begin(), kDebugFlags.end(), token) != kDebugFlags.end()) {
    return kCodegen;
  }
  return std::nullopt;
}

bool takes_argument_by_rule(FlagFamily family, std::string_view token) {
  return family != FlagFamily::kNvrtc &&
         std::find(kClangRuleFlagsWithArgument.begin(), kClangRuleFlagsWithArgument.end(), token) !=
             kClangRuleFlagsWithArgument.end();
}

} // namespace kcache::cachekey::flags
