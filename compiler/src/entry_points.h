#pragma once
// A compile whose output has nothing to launch is an error, not an artifact:
// an empty or all-`static` source would otherwise be published and served as
// a hit. CUBINs need a kernel (a global STO_CUDA_ENTRY function), PTX an
// `.entry`. (CPU objects are checked on the LLVM module: llvm_backend.cpp.)

#include <kcache/compiler/backend.h>

#include <optional>
#include <string_view>

namespace kcache::compiler {

// kCompileFailed "no entry points: ..." if `binary` (a CUBIN or PTX) has none.
std::optional<CompileError> check_entry_points(OutputKind kind, std::string_view binary);

// The error for a compile with nothing to launch; `what` says what is missing.
CompileError no_entry_points(std::string_view what);

} // namespace kcache::compiler
