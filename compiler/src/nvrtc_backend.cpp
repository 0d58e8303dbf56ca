#include "nvrtc_backend.h"

#include <kcache/compiler/cubin.h>

#include <nvrtc.h>

#include <memory>

namespace kcache::compiler {
namespace {

struct ProgramDeleter {
  void operator()(nvrtcProgram prog) const { nvrtcDestroyProgram(&prog); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

CompileError nvrtc_error(CompileError::Code code, std::string_view what, nvrtcResult r,
                         std::string log = {}) {
  return CompileError{code, std::string(what) + ": " + nvrtcGetErrorString(r), std::move(log)};
}

std::string program_log(nvrtcProgram prog) {
  std::size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) {
    return {};
  }
  std::string log(size, '\0');
  nvrtcGetProgramLog(prog, log.data());
  log.resize(size - 1); // drop the terminating NUL
  return log;
}

} // namespace

cachekey::ToolchainFingerprint NvrtcBackend::toolchain() const {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  cachekey::ToolchainFingerprint fp;
  fp.add("nvrtc", std::to_string(major) + "." + std::to_string(minor))
      .add("kcache", std::string(cachekey::kKcacheCodegenVersion));
  return fp;
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
    return tl::unexpected(
        nvrtc_error(CompileError::Code::kCompileFailed, "NVRTC compile", compiled, std::move(log)));
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
  for (const std::string& expr : spec.name_expressions) {
    const char* lowered = nullptr;
    if (nvrtcGetLoweredName(prog.get(), expr.c_str(), &lowered) == NVRTC_SUCCESS && lowered) {
      result.lowered_names[expr] = lowered;
    }
  }
  if (want_cubin) {
    const auto info = inspect_cubin(result.binary);
    if (!info || info->sm != *sm) {
      return tl::unexpected(CompileError{CompileError::Code::kInternal,
                                         "NVRTC returned a CUBIN that is not for " + spec.target,
                                         {}});
    }
  }
  result.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  return result;
}

} // namespace kcache::compiler
