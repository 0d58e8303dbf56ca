#include "nvjitlink_backend.h"

#include "entry_points.h"
#include "toolchain_identity.h"

#include <kcache/compiler/cubin.h>
#include <kcache/compiler/diagnostics.h>

#include <nvJitLink.h>

namespace kcache::compiler {
namespace {

class Linker {
public:
  explicit Linker(std::vector<const char*> options) { // nvJitLinkCreate wants a mutable array
    result_ = nvJitLinkCreate(&handle_, static_cast<std::uint32_t>(options.size()), options.data());
  }
  ~Linker() {
    if (handle_ != nullptr) {
      nvJitLinkDestroy(&handle_);
    }
  }
  Linker(const Linker&) = delete;
  Linker& operator=(const Linker&) = delete;

  nvJitLinkResult created() const { return result_; }
  nvJitLinkHandle get() const { return handle_; }

  std::string logs() const {
    std::string out;
    std::size_t size = 0;
    if (nvJitLinkGetErrorLogSize(handle_, &size) == NVJITLINK_SUCCESS && size > 1) {
      std::string log(size, '\0');
      nvJitLinkGetErrorLog(handle_, log.data());
      out += log.substr(0, size - 1);
    }
    if (nvJitLinkGetInfoLogSize(handle_, &size) == NVJITLINK_SUCCESS && size > 1) {
      std::string log(size, '\0');
      nvJitLinkGetInfoLog(handle_, log.data());
      out += log.substr(0, size - 1);
    }
    return clean_log(out);
  }

private:
  nvJitLinkHandle handle_ = nullptr;
  nvJitLinkResult result_ = NVJITLINK_ERROR_INTERNAL;
};

} // namespace

cachekey::ToolchainFingerprint NvJitLinkBackend::toolchain() const {
  unsigned major = 0, minor = 0;
  nvJitLinkVersion(&major, &minor);
  cachekey::ToolchainFingerprint fp;
  fp.add("nvjitlink", std::to_string(major) + "." + std::to_string(minor))
      .add("nvjitlink-library", library_identity(reinterpret_cast<const void*>(&nvJitLinkVersion)))
      .add("kcache", std::string(cachekey::kKcacheCodegenVersion));
  return fp;
}

std::vector<std::string> NvJitLinkBackend::toolchain_dirs() const {
  return {library_root(reinterpret_cast<const void*>(&nvJitLinkVersion))};
}

CompileOutcome NvJitLinkBackend::compile(const CompileSpec& spec) const {
  const auto start = std::chrono::steady_clock::now();
  const auto sm = sm_of_target(spec.target);
  if (!sm || !spec.target.starts_with("sm_") || spec.output != OutputKind::kCubin) {
    return tl::unexpected(CompileError{
        CompileError::Code::kInvalidSpec,
        "ptx links to a cubin for a real architecture (sm_XX[a]), got '" + spec.target + "'",
        {}});
  }
  std::vector<std::string> options = {"-arch=" + spec.target};
  options.insert(options.end(), spec.options.begin(), spec.options.end());
  std::vector<const char*> option_ptrs;
  option_ptrs.reserve(options.size());
  for (const std::string& o : options) {
    option_ptrs.push_back(o.c_str());
  }
  Linker linker(option_ptrs);
  if (linker.created() != NVJITLINK_SUCCESS) {
    return tl::unexpected(CompileError{CompileError::Code::kInvalidSpec,
                                       "nvJitLinkCreate rejected the options (error " +
                                           std::to_string(linker.created()) + ")",
                                       {}});
  }
  if (nvJitLinkAddData(linker.get(), NVJITLINK_INPUT_PTX, spec.source.text.data(),
                       spec.source.text.size(), spec.source.name.c_str()) != NVJITLINK_SUCCESS ||
      nvJitLinkComplete(linker.get()) != NVJITLINK_SUCCESS) {
    return tl::unexpected(tidy_error(CompileError{
        CompileError::Code::kCompileFailed, "nvJitLink could not link the PTX", linker.logs()}));
  }
  CompileResult result;
  result.kind = OutputKind::kCubin;
  std::size_t size = 0;
  if (nvJitLinkGetLinkedCubinSize(linker.get(), &size) != NVJITLINK_SUCCESS) {
    return tl::unexpected(
        CompileError{CompileError::Code::kInternal, "nvJitLink: no cubin", linker.logs()});
  }
  result.binary.resize(size);
  if (nvJitLinkGetLinkedCubin(linker.get(), result.binary.data()) != NVJITLINK_SUCCESS) {
    return tl::unexpected(
        CompileError{CompileError::Code::kInternal, "nvJitLink: no cubin", linker.logs()});
  }
  result.log = linker.logs();
  const auto info = inspect_cubin(result.binary);
  if (!info || info->sm != *sm) {
    return tl::unexpected(CompileError{CompileError::Code::kInternal,
                                       "nvJitLink returned a CUBIN that is not for " + spec.target,
                                       {}});
  }
  if (auto empty = check_entry_points(OutputKind::kCubin, result.binary)) {
    empty->log = std::move(result.log);
    return tl::unexpected(std::move(*empty));
  }
  result.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  return result;
}

} // namespace kcache::compiler
