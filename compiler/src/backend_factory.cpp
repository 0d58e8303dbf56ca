#include <kcache/compiler/backends.h>

#if KCACHE_HAVE_LLVM
#include "cpp_backend.h"
#include "llvm_backend.h"
#endif
#if KCACHE_HAVE_CUDA
#include "nvjitlink_backend.h"
#include "nvrtc_backend.h"
#endif

namespace kcache::compiler {

namespace {

// Why a backend is missing: the build that left it out says which.
std::string missing_reason(Backend backend) {
  const bool llvm_family = backend == Backend::kLlvmIr || backend == Backend::kCpp;
  if (llvm_family && !KCACHE_HAVE_LLVM) {
    return " (this kcache-worker is the CUDA-only build, KCACHE_WITH_LLVM=OFF: it has the cuda "
           "and ptx backends only)";
  }
  if (!llvm_family && !KCACHE_HAVE_CUDA) {
    return " (built without the CUDA Toolkit: no NVRTC or nvJitLink)";
  }
  return "";
}

} // namespace

tl::expected<std::unique_ptr<CompilerBackend>, CompileError> make_backend(Backend backend) {
  switch (backend) {
#if KCACHE_HAVE_LLVM
  case Backend::kLlvmIr:
    return std::make_unique<LlvmBackend>();
  case Backend::kCpp:
    return std::make_unique<CppBackend>();
#endif
#if KCACHE_HAVE_CUDA
  case Backend::kCuda:
    return std::make_unique<NvrtcBackend>();
  case Backend::kPtx:
    return std::make_unique<NvJitLinkBackend>();
#endif
  default:
    return tl::unexpected(CompileError{CompileError::Code::kUnavailable,
                                       "the " + std::string(backend_name(backend)) +
                                           " backend is not built into this kcache" +
                                           missing_reason(backend),
                                       {}});
  }
}

} // namespace kcache::compiler
