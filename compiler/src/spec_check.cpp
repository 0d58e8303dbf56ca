#include <kcache/cachekey/source_includes.h>
#include <kcache/compiler/spec_check.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <set>

namespace kcache::compiler {
namespace {

using cachekey::check_relative_name;
using cachekey::FlagFamily;
using cachekey::FlagRole;
using cachekey::scan_includes;

std::string join(const auto& items, std::string_view sep) {
  std::string out;
  for (const auto& item : items) {
    out += (out.empty() ? "" : std::string(sep)) + std::string(item);
  }
  return out;
}

// Options of the llvm-ir and ptx backends: short lists that the backends
// themselves enforce; kcache keys them verbatim (order kept).
constexpr std::array<std::string_view, 5> kLlvmExact = {"-O0", "-O1", "-O2", "-O3", "-ffast-math"};
constexpr std::array<std::string_view, 1> kLlvmPrefixes = {"-mattr="};
constexpr std::array<std::string_view, 8> kNvJitLinkExact = {
    "-O0", "-O1", "-O2", "-O3", "-g", "-lineinfo", "-lto", "-optimize-unused-variables"};
constexpr std::array<std::string_view, 9> kNvJitLinkPrefixes = {
    "-ftz=",    "-prec-div=",      "-prec-sqrt=",    "-fma=",           "-maxrregcount=",
    "-Xptxas=", "-split-compile=", "-kernels-used=", "-variables-used="};

tl::expected<std::vector<std::string>, std::string>
check_listed(std::string_view backend, const std::vector<std::string>& options,
             std::span<const std::string_view> exact, std::span<const std::string_view> prefixes) {
  for (const std::string& opt : options) {
    const bool ok = std::find(exact.begin(), exact.end(), opt) != exact.end() ||
                    std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) {
                      return opt.starts_with(p) && opt.size() > p.size();
                    });
    if (!ok) {
      return tl::unexpected("option '" + opt + "' is not supported by the " + std::string(backend) +
                            " backend (valid: " + join(exact, " ") + " " + join(prefixes, "... ") +
                            "...)");
    }
  }
  return options;
}

std::string refusal(const cachekey::Flag& flag) {
  const std::string written = join(flag.tokens, " ");
  switch (flag.role) {
  case FlagRole::kHostPath:
    return "option '" + written +
           "' makes the compiler read a host path; a compile spec carries its headers "
           "(spec.headers; the clients' pack_headers helper packs them from your disk)";
  case FlagRole::kWritesFile:
    return "option '" + written + "' makes the compiler write or read files beside the output";
  case FlagRole::kDependencyOutput:
    return "option '" + written + "' writes a dependency file; kcache workers write no files";
  case FlagRole::kOutputPath:
    return "option '" + written + "' names an output path; kcache returns the output itself";
  case FlagRole::kSetByKcache:
    return "option '" + written + "' is decided by the spec's target and output fields";
  default:
    return "option '" + written + "' is not allowed in a compile spec";
  }
}

tl::expected<std::vector<std::string>, std::string> canonical_options(const CompileSpec& spec) {
  FlagFamily family = FlagFamily::kGeneric;
  switch (spec.backend) {
  case Backend::kCuda:
    family = FlagFamily::kNvrtc;
    break;
  case Backend::kCpp:
    family = FlagFamily::kClang;
    break;
  case Backend::kLlvmIr:
    return check_listed("llvm-ir", spec.options, kLlvmExact, kLlvmPrefixes);
  case Backend::kPtx:
    return check_listed("ptx", spec.options, kNvJitLinkExact, kNvJitLinkPrefixes);
  }
  auto parsed = cachekey::parse_flags(family, spec.options);
  if (!parsed) {
    return tl::unexpected(parsed.error().message);
  }
  for (const cachekey::Flag& flag : *parsed) {
    if (flag.role != FlagRole::kCodegen && flag.role != FlagRole::kMacro &&
        flag.role != FlagRole::kDiagnostic) {
      return tl::unexpected(refusal(flag));
    }
  }
  return cachekey::render_flags(*parsed, /*for_key=*/false);
}

bool is_cuda_target(std::string_view t) {
  for (std::string_view prefix : {"sm_", "compute_"}) {
    if (t.starts_with(prefix)) {
      t.remove_prefix(prefix.size());
      if (!t.empty() && (t.back() == 'a' || t.back() == 'f')) {
        t.remove_suffix(1);
      }
      return !t.empty() && t.size() <= 4 && std::all_of(t.begin(), t.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      });
    }
  }
  return false;
}

bool is_cpu_name(std::string_view t) {
  return !t.empty() && t.size() <= 64 && std::all_of(t.begin(), t.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

tl::expected<void, std::string> check_output(const CompileSpec& spec) {
  std::vector<OutputKind> allowed;
  switch (spec.backend) {
  case Backend::kCuda:
    allowed = {OutputKind::kCubin, OutputKind::kPtx};
    break;
  case Backend::kPtx:
    allowed = {OutputKind::kCubin};
    break;
  case Backend::kLlvmIr:
    allowed = {OutputKind::kObject, OutputKind::kSharedObject, OutputKind::kPtx};
    break;
  case Backend::kCpp:
    allowed = {OutputKind::kObject, OutputKind::kSharedObject};
    break;
  }
  if (std::find(allowed.begin(), allowed.end(), spec.output) == allowed.end()) {
    std::vector<std::string_view> names;
    names.reserve(allowed.size());
    for (OutputKind k : allowed) {
      names.push_back(output_name(k));
    }
    return tl::unexpected("the " + std::string(backend_name(spec.backend)) +
                          " backend cannot produce '" + std::string(output_name(spec.output)) +
                          "' (valid: " + join(names, ", ") + ")");
  }
  return {};
}

tl::expected<void, std::string> check_target(const CompileSpec& spec,
                                             const cachekey::ToolchainFingerprint* toolchain) {
  const bool gpu = spec.backend == Backend::kCuda || spec.backend == Backend::kPtx ||
                   spec.output == OutputKind::kPtx;
  if (spec.target == "native") {
    return tl::unexpected(std::string(
        "target 'native' must be resolved to this host's CPU before keying (kcached does it)"));
  }
  if (toolchain != nullptr) {
    const auto& components = toolchain->components();
    if (const auto listed = components.find(std::string(kTargetsComponent));
        listed != components.end() && !(spec.target.empty() && !gpu)) {
      const std::string padded = " " + listed->second + " ";
      if (padded.find(" " + spec.target + " ") == std::string::npos) {
        return tl::unexpected("target '" + spec.target + "' is not one the " +
                              std::string(backend_name(spec.backend)) +
                              " toolchain builds (valid: " + listed->second + ")");
      }
      return {};
    }
  }
  const bool ok =
      gpu ? is_cuda_target(spec.target) : spec.target.empty() || is_cpu_name(spec.target);
  if (!ok) {
    return tl::unexpected("target '" + spec.target + "' is not " +
                          (gpu ? "sm_XX[a|f] or compute_XX[a|f]" : "a CPU name"));
  }
  if (spec.backend == Backend::kCuda && spec.output == OutputKind::kCubin &&
      !spec.target.starts_with("sm_")) {
    return tl::unexpected("a CUBIN needs a real architecture (sm_XX), not " + spec.target);
  }
  return {};
}

tl::expected<void, std::string> check_file(const SourceFile& file, Backend backend) {
  if (auto ok = check_relative_name(file.name); !ok) {
    return tl::unexpected("file name " + ok.error());
  }
  if (backend == Backend::kLlvmIr) {
    // IR has no preprocessor; module-level asm could still name a file.
    for (std::string_view word : {".incbin", ".include"}) {
      if (file.text.find(word) != std::string::npos) {
        return tl::unexpected(file.name + ": the assembler directive " + std::string(word) +
                              " reads a host file and is not allowed in a compile spec");
      }
    }
    return {};
  }
  if (auto refs = scan_includes(file.name, file.text); !refs) {
    return tl::unexpected(refs.error());
  }
  return {};
}

tl::expected<void, std::string> check_files(const CompileSpec& spec) {
  if (auto ok = check_file(spec.source, spec.backend); !ok) {
    return ok;
  }
  std::set<std::string, std::less<>> names = {spec.source.name};
  for (const SourceFile& header : spec.headers) {
    if (auto ok = check_file(header, spec.backend); !ok) {
      return ok;
    }
    if (!names.insert(header.name).second) {
      return tl::unexpected("file '" + header.name + "' appears twice in the spec");
    }
  }
  return {};
}

} // namespace

tl::expected<CompileSpec, std::string>
prepare_spec(const CompileSpec& spec, const cachekey::ToolchainFingerprint* toolchain) {
  if (auto ok = check_output(spec); !ok) {
    return tl::unexpected(ok.error());
  }
  if (auto ok = check_target(spec, toolchain); !ok) {
    return tl::unexpected(ok.error());
  }
  if (auto ok = check_files(spec); !ok) {
    return tl::unexpected(ok.error());
  }
  auto options = canonical_options(spec);
  if (!options) {
    return tl::unexpected(options.error());
  }
  CompileSpec prepared = spec;
  prepared.options = std::move(*options);
  return prepared;
}

} // namespace kcache::compiler
