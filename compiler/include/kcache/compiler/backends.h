#pragma once
// The toolchain backends (library kcache::compiler_backends): linked by
// kcache-worker and tests only, never by kcached.

#include <kcache/compiler/backend.h>
#include <kcache/compiler/worker_protocol.h>

namespace kcache::compiler {

// The backend for `backend`, or kUnavailable when it was not built here.
tl::expected<std::unique_ptr<CompilerBackend>, CompileError> make_backend(Backend backend);

// This host's CPU and its features as LLVM names them (what -march=native
// would compile for); an error in a build without LLVM.
tl::expected<HostTarget, std::string> detect_host_target();

} // namespace kcache::compiler
