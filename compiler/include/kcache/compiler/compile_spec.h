#pragma once
// What to compile: a backend, sources, entry points, options and a target.
// Specs are plain data: they travel to kcache-worker processes and into the
// job journal as JSON, and their digest (with the toolchain) keys the compile.

#include <kcache/cachekey/sha256.h>
#include <kcache/cachekey/toolchain.h>

#include <tl/expected.hpp>

#include <map>
#include <string>
#include <vector>

namespace kcache::compiler {

enum class Backend {
  kCuda,   // CUDA C++ -> CUBIN or PTX (NVRTC)
  kPtx,    // PTX -> CUBIN (nvJitLink)
  kLlvmIr, // LLVM IR -> native object or PTX (LLVM)
  kCpp,    // C++ -> native object (clang)
};
std::string_view backend_name(Backend backend);
tl::expected<Backend, std::string> parse_backend(std::string_view name);

enum class OutputKind {
  kCubin,
  kPtx,
  kObject,       // a relocatable ELF object
  kSharedObject, // an ELF shared object, ready for dlopen (linked in process by lld)
};
std::string_view output_name(OutputKind kind);
tl::expected<OutputKind, std::string> parse_output(std::string_view name);

struct SourceFile {
  std::string name; // "kernel.cu"; also the include name for headers
  std::string text;
  friend bool operator==(const SourceFile&, const SourceFile&) = default;
};

struct CompileSpec {
  Backend backend = Backend::kCuda;
  SourceFile source;
  std::vector<SourceFile> headers;           // resolvable by #include "name"
  std::vector<std::string> name_expressions; // entry points / template instantiations
  std::vector<std::string> options;          // -DNAME=V, --use_fast_math, -O3, ...
  std::string target;                        // "sm_90a", "compute_90", "x86-64-v3", "znver4"
  OutputKind output = OutputKind::kCubin;
  friend bool operator==(const CompileSpec&, const CompileSpec&) = default;
};

std::string spec_to_json(const CompileSpec& spec);
tl::expected<CompileSpec, std::string> spec_from_json(std::string_view text);

// Identical specs compile once: the key covers the backend, the sources and
// headers, the name expressions, the options as their compiler family reads
// them (cachekey/compiler_flags.h), the target and the toolchain that would
// compile it. Bump kCompileKeySchema whenever this encoding changes.
inline constexpr std::string_view kCompileKeySchema = "kcache-compile/2";
cachekey::Digest compile_key(const CompileSpec& spec,
                             const cachekey::ToolchainFingerprint& toolchain);

} // namespace kcache::compiler
