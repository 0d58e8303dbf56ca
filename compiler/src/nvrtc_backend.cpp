#include "nvrtc_backend.h"

#include "entry_points.h"
#include "toolchain_identity.h"

#include <kcache/compiler/cubin.h>
#include <kcache/compiler/diagnostics.h>
#include <kcache/compiler/spec_check.h>

#include <nvrtc.h>

#include <filesystem>
#include <memory>
#include <vector>

namespace kcache::compiler {
namespace {

struct ProgramDeleter {
  void operator()(nvrtcProgram prog) const { nvrtcDestroyProgram(&prog); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

// The log's first diagnostic, if any, then "(<what>: NVRTC_ERROR_...)".
CompileError nvrtc_error(CompileError::Code code, std::string_view what, nvrtcResult r,
                         std::string log = {}) {
  return tidy_error(
      CompileError{code, std::string(what) + ": " + nvrtcGetErrorString(r), std::move(log)});
}

std::string program_log(nvrtcProgram prog) {
  std::size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) {
    return {};
  }
  std::string log(size, '\0');
  nvrtcGetProgramLog(prog, log.data());
  // The size counts the terminating NUL, and a ptxas failure's log can hold
  // more: the log is cleaned to valid UTF-8 without NULs.
  return clean_log(log);
}

} // namespace

namespace {

// The CUDA Toolkit this NVRTC belongs to: <root>/lib/libnvrtc.so -> <root>.
std::filesystem::path toolkit_root() {
  return library_root(reinterpret_cast<const void*>(&nvrtcVersion));
}

// The toolkit's own headers (cuda_bf16.h, cooperative_groups, CCCL), found as
// nvcc finds them: part of the toolchain, digested in its fingerprint, never
// a user -I.
std::vector<std::string> toolkit_include_dirs() {
  const std::filesystem::path root = toolkit_root();
  if (root.empty()) {
    return {};
  }
  std::vector<std::string> dirs;
  for (const auto& dir : {root / "include", root / "include" / "cccl"}) {
    if (std::filesystem::is_directory(dir)) {
      dirs.push_back(dir.string());
    }
  }
  return dirs;
}

// Every target this NVRTC builds, as specs name them.
std::string supported_targets() {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) {
    return {};
  }
  std::vector<int> archs(static_cast<std::size_t>(count));
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) {
    return {};
  }
  std::string out;
  for (int arch : archs) {
    const std::string n = std::to_string(arch);
    std::vector<std::string> suffixes = {""};
    if (arch >= 90) {
      suffixes.push_back("a"); // arch-specific features (wgmma, setmaxnreg)
    }
    if (arch >= 100) {
      suffixes.push_back("f"); // family-portable
    }
    for (const std::string& suffix : suffixes) {
      for (const char* prefix : {"sm_", "compute_"}) {
        out += out.empty() ? "" : " ";
        out.append(prefix).append(n).append(suffix);
      }
    }
  }
  return out;
}

} // namespace

cachekey::ToolchainFingerprint NvrtcBackend::toolchain() const {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  const std::string library = library_path(reinterpret_cast<const void*>(&nvrtcVersion));
  const std::filesystem::path lib_dir = std::filesystem::path(library).parent_path();
  const std::string builtins =
      (lib_dir / ("libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor)))
          .string();
  const std::vector<std::string> includes = toolkit_include_dirs();
  cachekey::ToolchainFingerprint fp;
  fp.add("nvrtc", std::to_string(major) + "." + std::to_string(minor))
      .add("nvrtc-library", file_identity(library))
      .add("nvrtc-builtins", file_identity(builtins))
      .add("cuda-include", tree_digest(includes))
      .add(std::string(kTargetsComponent), supported_targets())
      .add("kcache", std::string(cachekey::kKcacheCodegenVersion));
  return fp;
}

std::vector<std::string> NvrtcBackend::toolchain_dirs() const {
  return {toolkit_root()};
}

CompileOutcome NvrtcBackend::compile(const CompileSpec& spec) const {
  const auto start = std::chrono::steady_clock::now();
  const auto sm = sm_of_target(spec.target);
  if (!sm) {
    return tl::unexpected(
        CompileError{CompileError::Code::kInvalidSpec,
                     "cuda target must be sm_XX[a] or compute_XX[a], got '" + spec.target + "'",
                     {}});
  }
  if (spec.output != OutputKind::kCubin && spec.output != OutputKind::kPtx) {
    return tl::unexpected(
        CompileError{CompileError::Code::kInvalidSpec, "cuda compiles to cubin or ptx", {}});
  }
  const bool want_cubin = spec.output == OutputKind::kCubin;
  if (want_cubin && !spec.target.starts_with("sm_")) {
    return tl::unexpected(
        CompileError{CompileError::Code::kInvalidSpec,
                     "a CUBIN needs a real architecture (sm_XX), not " + spec.target,
                     {}});
  }
  // NVRTC emits PTX for virtual architectures only.
  std::string arch = spec.target;
  if (!want_cubin && arch.starts_with("sm_")) {
    arch = "compute_" + arch.substr(3);
  }

  std::vector<const char*> header_texts, header_names;
  for (const SourceFile& h : spec.headers) {
    header_texts.push_back(h.text.c_str());
    header_names.push_back(h.name.c_str());
  }
  nvrtcProgram raw = nullptr;
  if (nvrtcResult r = nvrtcCreateProgram(&raw, spec.source.text.c_str(), spec.source.name.c_str(),
                                         static_cast<int>(header_texts.size()), header_texts.data(),
                                         header_names.data());
      r != NVRTC_SUCCESS) {
    return tl::unexpected(nvrtc_error(CompileError::Code::kInternal, "nvrtcCreateProgram", r));
  }
  Program prog(raw);
  for (const std::string& expr : spec.name_expressions) {
    if (nvrtcResult r = nvrtcAddNameExpression(prog.get(), expr.c_str()); r != NVRTC_SUCCESS) {
      return tl::unexpected(
          nvrtc_error(CompileError::Code::kInvalidSpec, "name expression '" + expr + "'", r));
    }
  }
  std::vector<std::string> options = {"--gpu-architecture=" + arch, "-default-device"};
  for (const std::string& dir : toolkit_include_dirs()) {
    options.push_back("--include-path=" + dir);
  }
  options.insert(options.end(), spec.options.begin(), spec.options.end());
  std::vector<const char*> option_ptrs;
  option_ptrs.reserve(options.size());
  for (const std::string& o : options) {
    option_ptrs.push_back(o.c_str());
  }
  const nvrtcResult compiled =
      nvrtcCompileProgram(prog.get(), static_cast<int>(option_ptrs.size()), option_ptrs.data());
  std::string log = program_log(prog.get());
  if (compiled != NVRTC_SUCCESS) {
    return tl::unexpected(nvrtc_error(CompileError::Code::kCompileFailed, "NVRTC compile failed",
                                      compiled, std::move(log)));
  }

  CompileResult result;
  result.kind = spec.output;
  result.log = std::move(log);
  std::size_t size = 0;
  nvrtcResult got =
      want_cubin ? nvrtcGetCUBINSize(prog.get(), &size) : nvrtcGetPTXSize(prog.get(), &size);
  if (got == NVRTC_SUCCESS) {
    result.binary.resize(size);
    got = want_cubin ? nvrtcGetCUBIN(prog.get(), result.binary.data())
                     : nvrtcGetPTX(prog.get(), result.binary.data());
  }
  if (got != NVRTC_SUCCESS) {
    return tl::unexpected(nvrtc_error(CompileError::Code::kInternal, "NVRTC output", got));
  }
  if (!want_cubin && !result.binary.empty() && result.binary.back() == '\0') {
    result.binary.pop_back(); // PTX comes NUL-terminated
  }
  // Every name expression the spec asks for must come back lowered: a
  // caller would otherwise look up a kernel the artifact does not name.
  for (const std::string& expr : spec.name_expressions) {
    const char* lowered = nullptr;
    const nvrtcResult r = nvrtcGetLoweredName(prog.get(), expr.c_str(), &lowered);
    if (r != NVRTC_SUCCESS || lowered == nullptr || *lowered == '\0') {
      return tl::unexpected(nvrtc_error(CompileError::Code::kInvalidSpec,
                                        "name expression '" + expr + "' has no lowered name", r,
                                        result.log));
    }
    result.lowered_names[expr] = lowered;
  }
  if (want_cubin) {
    const auto info = inspect_cubin(result.binary);
    if (!info || info->sm != *sm) {
      return tl::unexpected(CompileError{CompileError::Code::kInternal,
                                         "NVRTC returned a CUBIN that is not for " + spec.target,
                                         {}});
    }
  }
  if (auto empty = check_entry_points(spec.output, result.binary)) {
    empty->log = std::move(result.log);
    return tl::unexpected(std::move(*empty));
  }
  result.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  return result;
}

} // namespace kcache::compiler
