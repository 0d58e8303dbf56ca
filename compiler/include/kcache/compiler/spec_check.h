#pragma once
// A compile spec is untrusted input. Before kcached keys it and before a
// worker compiles it, prepare_spec() makes it hermetic and canonical:
//   - file names stay inside the spec (relative, no ".."); every #include,
//     #embed, __has_include and "#pragma GCC dependency" names a literal,
//     relative header (a spec header or a toolchain header), and assembler
//     .include/.incbin are refused;
//   - options are parsed with the backend's compiler family; an option that
//     reads or writes host files (-I, -include, -MD -MF x, --time f, @file),
//     one that kcache decides itself (-arch, -o, -c, --target) and one the
//     family does not know are refused with the reason;
//   - the output kind must be one the backend builds, and the target one the
//     worker's toolchain lists (its "targets" component), else the error
//     names the valid values;
//   - options come back in canonical spelling with -D/-U resolved, which is
//     what both the key and the compiler see.

#include <kcache/cachekey/compiler_flags.h>
#include <kcache/cachekey/toolchain.h>
#include <kcache/compiler/compile_spec.h>

#include <tl/expected.hpp>

#include <string>

namespace kcache::compiler {

// The toolchain component that lists the targets a backend can build,
// space-separated ("sm_80 sm_90 sm_90a ...", "x86-64 x86-64-v3 znver4 ...").
inline constexpr std::string_view kTargetsComponent = "targets";

// Returns the spec to key and compile, or a message for the submitter.
// `toolchain`, when given, is the backend's fingerprint (for its targets).
tl::expected<CompileSpec, std::string>
prepare_spec(const CompileSpec& spec, const cachekey::ToolchainFingerprint* toolchain = nullptr);

} // namespace kcache::compiler
