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
    {"--define-macro", "-D", kJoinedOrSeparate, kMacro},
    {"-D", "-D", kJoinedOrSeparate, kMacro},
    {"--undefine-macro", "-U", kJoinedOrSeparate, kMacro},
    {"-U", "-U", kJoinedOrSeparate, kMacro},
    {"--include-path", "--include-path", kJoinedOrSeparate, kHostPath},
    {"-I", "--include-path", kJoinedOrSeparate, kHostPath},
    {"--pre-include", "--pre-include", kJoinedOrSeparate, kHostPath},
    {"-include", "--pre-include", kJoinedOrSeparate, kHostPath},
    {"--use-pch", "--use-pch", kEquals, kHostPath},
    {"-use-pch", "--use-pch", kEquals, kHostPath},
    {"--pch-dir", "--pch-dir", kEquals, kWritesFile},
    {"-pch-dir", "--pch-dir", kEquals, kWritesFile},
    {"--create-pch", "--create-pch", kEquals, kWritesFile},
    {"-create-pch", "--create-pch", kEquals, kWritesFile},
    {"--pch", "--pch", kNone, kWritesFile},
    {"-pch", "--pch", kNone, kWritesFile},
    {"--time", "--time", kEquals, kWritesFile},
    {"-time", "--time", kEquals, kWritesFile},
    {"--fdevice-time-trace", "--fdevice-time-trace", kEquals, kWritesFile},
    {"-fdevice-time-trace", "--fdevice-time-trace", kEquals, kWritesFile},
    {"--device-time-trace", "--fdevice-time-trace", kEquals, kWritesFile},
    {"--gpu-architecture", "--gpu-architecture", kEquals, kSetByKcache},
    {"-arch", "--gpu-architecture", kEquals, kSetByKcache},
    {"--optix-ir", "--optix-ir", kNone, kSetByKcache},
    {"-optix-ir", "--optix-ir", kNone, kSetByKcache},
    {"--emit-optix-ir", "--optix-ir", kNone, kSetByKcache},
    {"--device-debug", "--device-debug", kNone, kCodegen},
    {"-G", "--device-debug", kNone, kCodegen},
    {"--generate-line-info", "--generate-line-info", kNone, kCodegen},
    {"-lineinfo", "--generate-line-info", kNone, kCodegen},
    {"--use_fast_math", "--use_fast_math", kNone, kCodegen},
    {"-use_fast_math", "--use_fast_math", kNone, kCodegen},
    {"--device-as-default-execution-space", "-default-device", kNone, kCodegen},
    {"-default-device", "-default-device", kNone, kCodegen},
    {"--restrict", "--restrict", kNone, kCodegen},
    {"-restrict", "--restrict", kNone, kCodegen},
    {"--device-c", "--device-c", kNone, kCodegen},
    {"-dc", "--device-c", kNone, kCodegen},
    {"--device-w", "--device-w", kNone, kCodegen},
    {"-dw", "--device-w", kNone, kCodegen},
    {"--relocatable-device-code", "--relocatable-device-code", kEquals, kCodegen},
    {"-rdc", "--relocatable-device-code", kEquals, kCodegen},
    {"--extensible-whole-program", "--extensible-whole-program", kNone, kCodegen},
    {"-ewp", "--extensible-whole-program", kNone, kCodegen},
    {"--dlink-time-opt", "--dlink-time-opt", kNone, kCodegen},
    {"-dlto", "--dlink-time-opt", kNone, kCodegen},
    {"--gen-opt-lto", "--gen-opt-lto", kNone, kCodegen},
    {"--extra-device-vectorization", "--extra-device-vectorization", kNone, kCodegen},
    {"-extra-device-vectorization", "--extra-device-vectorization", kNone, kCodegen},
    {"--device-int128", "--device-int128", kNone, kCodegen},
    {"--device-float128", "--device-float128", kNone, kCodegen},
    {"--no-source-include", "--no-source-include", kNone, kCodegen},
    {"-no-source-include", "--no-source-include", kNone, kCodegen},
    {"--minimal", "--minimal", kNone, kCodegen},
    {"-minimal", "--minimal", kNone, kCodegen},
    {"--fdevice-syntax-only", "--fdevice-syntax-only", kNone, kCodegen},
    {"--maxrregcount", "--maxrregcount", kEquals, kCodegen},
    {"-maxrregcount", "--maxrregcount", kEquals, kCodegen},
    {"--ftz", "--ftz", kEquals, kCodegen},
    {"-ftz", "--ftz", kEquals, kCodegen},
    {"--prec-sqrt", "--prec-sqrt", kEquals, kCodegen},
    {"-prec-sqrt", "--prec-sqrt", kEquals, kCodegen},
    {"--prec-div", "--prec-div", kEquals, kCodegen},
    {"-prec-div", "--prec-div", kEquals, kCodegen},
    {"--fmad", "--fmad", kEquals, kCodegen},
    {"-fmad", "--fmad", kEquals, kCodegen},
    {"--std", "--std", kEquals, kCodegen},
    {"-std", "--std", kEquals, kCodegen},
    {"--dopt", "--dopt", kEquals, kCodegen},
    {"-dopt", "--dopt", kEquals, kCodegen},
    {"--ptxas-options", "--ptxas-options", kEquals, kCodegen},
    {"-Xptxas", "--ptxas-options", kEquals, kCodegen},
    {"--jump-table-density", "--jump-table-density", kEquals, kCodegen},
    {"--modify-stack-limit", "--modify-stack-limit", kEquals, kCodegen},
    {"--split-compile", "--split-compile", kEquals, kCodegen},
    {"-split-compile", "--split-compile", kEquals, kCodegen},
    {"--Ofast-compile", "--Ofast-compile", kEquals, kCodegen},
    {"-Ofc", "--Ofast-compile", kEquals, kCodegen},
    {"--frandom-seed", "--frandom-seed", kEquals, kCodegen},
    {"--builtin-move-forward", "--builtin-move-forward", kEquals, kCodegen},
    {"--builtin-initializer-list", "--builtin-initializer-list", kEquals, kCodegen},
    {"--device-stack-protector", "--device-stack-protector", kEquals, kCodegen},
    {"--disable-warnings", "--disable-warnings", kNone, kDiagnostic},
    {"-w", "--disable-warnings", kNone, kDiagnostic},
    {"--diag-error", "--diag-error", kEquals, kDiagnostic},
    {"-diag-error", "--diag-error", kEquals, kDiagnostic},
    {"--diag-suppress", "--diag-suppress", kEquals, kDiagnostic},
    {"-diag-suppress", "--diag-suppress", kEquals, kDiagnostic},
    {"--diag-warn", "--diag-warn", kEquals, kDiagnostic},
    {"-diag-warn", "--diag-warn", kEquals, kDiagnostic},
    {"--brief-diagnostics", "--brief-diagnostics", kEquals, kDiagnostic},
    {"-brief-diag", "--brief-diagnostics", kEquals, kDiagnostic},
    {"--display-error-number", "--display-error-number", kNone, kDiagnostic},
    {"-err-no", "--display-error-number", kNone, kDiagnostic},
    {"--no-display-error-number", "--no-display-error-number", kNone, kDiagnostic},
    {"-no-err-no", "--no-display-error-number", kNone, kDiagnostic},
    {"--optimization-info", "--optimization-info", kEquals, kDiagnostic},
    {"-opt-info", "--optimization-info", kEquals, kDiagnostic},
});

// The clang driver's options that a kernel compile uses, plus every option
// that reads or writes a host path or changes what is produced (refused in a
// spec). Options described by a rule (-W, -f, -m) are in rule_role().
constexpr std::array kClang = std::to_array<FlagSpec>({
    {"--define-macro", "-D", kJoinedOrSeparate, kMacro},
    {"-D", "-D", kJoinedOrSeparate, kMacro},
    {"--undefine-macro", "-U", kJoinedOrSeparate, kMacro},
    {"-U", "-U", kJoinedOrSeparate, kMacro},
    {"--include-directory", "-I", kJoinedOrSeparate, kHostPath},
    {"-I", "-I", kJoinedOrSeparate, kHostPath},
    {"-isystem-after", "-isystem-after", kJoinedOrSeparate, kHostPath},
    {"-isystem", "-isystem", kJoinedOrSeparate, kHostPath},
    {"-isysroot", "-isysroot", kJoinedOrSeparate, kHostPath},
    {"-iquote", "-iquote", kJoinedOrSeparate, kHostPath},
    {"-idirafter", "-idirafter", kJoinedOrSeparate, kHostPath},
    {"-iprefix", "-iprefix", kJoinedOrSeparate, kHostPath},
    {"-iwithprefixbefore", "-iwithprefixbefore", kJoinedOrSeparate, kHostPath},
    {"-iwithprefix", "-iwithprefix", kJoinedOrSeparate, kHostPath},
    {"-iwithsysroot", "-iwithsysroot", kJoinedOrSeparate, kHostPath},
    {"-iframework", "-iframework", kJoinedOrSeparate, kHostPath},
    {"-cxx-isystem", "-cxx-isystem", kJoinedOrSeparate, kHostPath},
    {"-include-pch", "-include-pch", kJoinedOrSeparate, kHostPath},
    {"--include", "-include", kJoinedOrSeparate, kHostPath},
    {"-include", "-include", kJoinedOrSeparate, kHostPath},
    {"-imacros", "-imacros", kJoinedOrSeparate, kHostPath},
    {"--sysroot", "--sysroot", kEquals, kHostPath},
    {"--gcc-toolchain", "--gcc-toolchain", kEquals, kHostPath},
    {"--gcc-install-dir", "--gcc-install-dir", kEquals, kHostPath},
    {"-resource-dir", "-resource-dir", kEquals, kHostPath},
    {"--config", "--config", kEquals, kHostPath},
    {"-L", "-L", kJoinedOrSeparate, kHostPath},
    {"-F", "-F", kJoinedOrSeparate, kHostPath},
    {"-B", "-B", kJoinedOrSeparate, kHostPath},
    {"-Xclang", "-Xclang", kSeparate, kWritesFile},
    {"-Xlinker", "-Xlinker", kSeparate, kWritesFile},
    {"-Xassembler", "-Xassembler", kSeparate, kWritesFile},
    {"-Xpreprocessor", "-Xpreprocessor", kSeparate, kWritesFile},
    {"-Xanalyzer", "-Xanalyzer", kSeparate, kWritesFile},
    {"-mllvm", "-mllvm", kSeparate, kWritesFile},
    {"-save-temps", "-save-temps", kJoined, kWritesFile},
    {"-gsplit-dwarf", "-gsplit-dwarf", kJoined, kWritesFile},
    {"-MF", "-MF", kJoinedOrSeparate, kDependencyOutput},
    {"-MT", "-MT", kJoinedOrSeparate, kDependencyOutput},
    {"-MQ", "-MQ", kJoinedOrSeparate, kDependencyOutput},
    {"-MJ", "-MJ", kJoinedOrSeparate, kDependencyOutput},
    {"-MMD", "-MMD", kNone, kDependencyOutput},
    {"-MD", "-MD", kNone, kDependencyOutput},
    {"-MP", "-MP", kNone, kDependencyOutput},
    {"-MG", "-MG", kNone, kDependencyOutput},
    {"-MM", "-MM", kNone, kSetByKcache},
    {"-M", "-M", kNone, kSetByKcache},
    {"-o", "-o", kJoinedOrSeparate, kOutputPath},
    {"--target", "--target", kEquals, kSetByKcache},
    {"-target", "--target", kSeparate, kSetByKcache},
    {"-march", "-march", kEquals, kSetByKcache},
    {"-mcpu", "-mcpu", kEquals, kSetByKcache},
    {"-x", "-x", kJoinedOrSeparate, kSetByKcache},
    {"-c", "-c", kNone, kSetByKcache},
    {"-S", "-S", kNone, kSetByKcache},
    {"-E", "-E", kNone, kSetByKcache},
    {"-emit-llvm", "-emit-llvm", kNone, kSetByKcache},
    {"-shared", "-shared", kNone, kSetByKcache},
    {"-static", "-static", kNone, kSetByKcache},
    {"-###", "-###", kNone, kSetByKcache},
    {"-std", "-std", kEquals, kCodegen},
    {"--std", "-std", kEquals, kCodegen},
    {"-stdlib", "-stdlib", kEquals, kCodegen},
    {"-O", "-O", kJoined, kCodegen},
    {"-g", "-g", kJoined, kCodegen},
    {"-pthread", "-pthread", kNone, kCodegen},
    {"-ansi", "-ansi", kNone, kCodegen},
    {"-trigraphs", "-trigraphs", kNone, kCodegen},
    {"-nostdinc++", "-nostdinc++", kNone, kCodegen},
    {"-nostdlibinc", "-nostdlibinc", kNone, kCodegen},
    {"-nobuiltininc", "-nobuiltininc", kNone, kCodegen},
    {"-nostdinc", "-nostdinc", kNone, kCodegen},
    {"-pedantic-errors", "-pedantic-errors", kNone, kDiagnostic},
    {"-pedantic", "-pedantic", kNone, kDiagnostic},
    {"-w", "-w", kNone, kDiagnostic},
    {"-v", "-v", kNone, kDiagnostic},
    {"-H", "-H", kNone, kDiagnostic},
});

// nvcc's flags that take an argument, for client keys of nvcc command lines:
// their argument is never read as a flag of its own ("-Xcompiler -DX").
constexpr std::array kNvccExtra = std::to_array<FlagSpec>({
    {"--compiler-options", "--compiler-options", kEquals, kCodegen},
    {"-Xcompiler", "--compiler-options", kEquals, kCodegen},
    {"--linker-options", "--linker-options", kEquals, kCodegen},
    {"-Xlinker", "--linker-options", kEquals, kCodegen},
    {"--nvlink-options", "--nvlink-options", kEquals, kCodegen},
    {"-Xnvlink", "--nvlink-options", kEquals, kCodegen},
    {"--archive-options", "--archive-options", kEquals, kCodegen},
    {"-Xarchive", "--archive-options", kEquals, kCodegen},
    {"--compiler-bindir", "--compiler-bindir", kEquals, kCodegen},
    {"-ccbin", "--compiler-bindir", kEquals, kCodegen},
    {"--generate-code", "--generate-code", kEquals, kCodegen},
    {"-gencode", "--generate-code", kEquals, kCodegen},
    {"--gpu-code", "--gpu-code", kEquals, kCodegen},
    {"-code", "--gpu-code", kEquals, kCodegen},
    {"--output-directory", "--output-directory", kEquals, kOutputPath},
    {"-odir", "--output-directory", kEquals, kOutputPath},
    {"--output-file", "-o", kEquals, kOutputPath},
    {"--dependency-output", "-MF", kEquals, kDependencyOutput},
    {"--keep-dir", "--keep-dir", kEquals, kDependencyOutput},
    {"-keep-dir", "--keep-dir", kEquals, kDependencyOutput},
    {"--system-include", "-isystem", kJoinedOrSeparate, kHostPath},
    {"--library-path", "-L", kJoinedOrSeparate, kHostPath},
    {"--library", "-l", kJoinedOrSeparate, kCodegen},
    {"-l", "-l", kJoinedOrSeparate, kCodegen},
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

bool starts_with_any(std::string_view s, std::span<const std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](std::string_view p) { return s.starts_with(p); });
}

std::optional<FlagRole> clang_f_role(std::string_view token) {
  if (starts_with_any(token, kPrefixMaps)) {
    return kCodegen; // they change __FILE__ and debug info: keyed, and harmless
  }
  if (starts_with_any(token, kDiagnosticF)) {
    return kDiagnostic;
  }
  const bool names_a_file =
      std::any_of(kFileFlagWords.begin(), kFileFlagWords.end(),
                  [&](std::string_view w) { return token.find(w) != std::string_view::npos; });
  return names_a_file ? kHostPath : kCodegen;
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
    return kCodegen; // -mavx2, -mtune=..., -mattr=...; -march is in the table
  }
  return std::nullopt;
}

} // namespace kcache::cachekey::flags
