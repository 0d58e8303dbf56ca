#include "cpp_backend.h"
#include "llvm_backend.h"

#include <kcache/compiler/backends.h>

#if KCACHE_HAVE_CUDA
#include "nvjitlink_backend.h"
#include "nvrtc_backend.h"
#endif

namespace kcache::compiler {

tl::expected<std::unique_ptr<CompilerBackend>, CompileError> make_backend(Backend backend) {
  switch (backend) {
  case Backend::kLlvmIr:
    return std::make_unique<LlvmBackend>();
  case Backend::kCpp:
    return std::make_unique<CppBackend>();
#if KCACHE_HAVE_CUDA
  case Backend::kCuda:
    return std::make_unique<NvrtcBackend>();
  case Backend::kPtx:
    return std::make_unique<NvJitLinkBackend>();
#endif
  default:
    return tl::unexpected(CompileError{CompileError::Code::kUnavailable,
                                       "the " + std::string(backend_name(backend)) +
                                           " backend is not built into this kcache",
                                       {}});
  }
}

} // namespace kcache::compiler
