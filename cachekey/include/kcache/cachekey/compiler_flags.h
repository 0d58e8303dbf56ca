#pragma once
// Compiler flags parsed per compiler family, with their arguments. The key and
// the hermetic-spec check both read flags through this parser, so a flag is
// never mistaken for the argument of another ("-Xptxas -O0") or the other way
// round, and a flag the tables do not know is never dropped:
//   - kGeneric (flags a client hashes into its own key): an unknown flag and
//     the token after it are kept verbatim, in place;
//   - kNvrtc and kClang (flags of a compile spec, which a worker passes to
//     NVRTC or clang): an unknown flag is an error, as it is for the compiler.
// Spellings are canonicalized ("--define-macro=X" -> "-DX=1",
// "-use_fast_math" -> "--use_fast_math") and -D/-U are resolved to the macro
// table the compiler would see (last wins, -U in sequence).

#include <tl/expected.hpp>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::cachekey {

enum class FlagFamily {
  kGeneric, // any compiler; what KeyBuilder::options() hashes
  kNvrtc,   // NVRTC (the cuda backend)
  kClang,   // the clang driver (the cpp backend)
};
std::string_view family_name(FlagFamily family);

enum class FlagRole {
  kCodegen,          // may change the output: kept, in order
  kMacro,            // -D / -U: resolved into the macro table
  kDiagnostic,       // warnings and messages (kept in the key: some change macros)
  kDependencyOutput, // writes a dependency file beside the output (-MD, -MF x)
  kOutputPath,       // names the output file (-o x)
  kHostPath,         // makes the compiler read a host path (-I, -include, @file)
  kWritesFile,       // makes the compiler write a file (--time, -save-temps)
  kSetByKcache,      // decided by the spec's target or output (-arch, -c, --target)
  kUnknown,          // not in the family's table (kGeneric only; others refuse)
};
std::string_view role_name(FlagRole role);

// How a flag and its value are rendered.
enum class FlagForm {
  kBare,    // "-G"; also a flag kept verbatim (kUnknown)
  kGlued,   // "-O2", "-DX=1"
  kEquals,  // "--std=c++17"
  kTwoArgs, // "-Xclang", "-v"
};

struct Flag {
  std::string name;  // canonical spelling: "--ptxas-options", "-O", "-D"
  std::string value; // "" when the flag takes none
  bool has_value = false;
  FlagRole role = FlagRole::kCodegen;
  FlagForm form = FlagForm::kBare;
  std::vector<std::string> tokens; // as written, one or two arguments
  // The canonical rendering: one argument, or two for kTwoArgs.
  std::vector<std::string> canonical() const;
};

struct FlagError {
  std::string message;
};

tl::expected<std::vector<Flag>, FlagError> parse_flags(FlagFamily family,
                                                       std::span<const std::string> args);

// The flags in canonical form with the macro table resolved. `for_key` leaves
// out only the dependency-file and output-path flags, which name where side
// files go. Warning flags stay: clang's -Wno-deprecated undefines
// __DEPRECATED, so "diagnostics only" is not a rule that can be proven.
// Compilers are given the full rendering (for_key false), so a worker
// compiles exactly what the key names.
std::vector<std::string> render_flags(std::span<const Flag> flags, bool for_key);

} // namespace kcache::cachekey
