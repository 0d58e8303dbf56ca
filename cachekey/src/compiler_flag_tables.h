#pragma once
// The flag tables of each compiler family: spelling, how the flag takes its
// argument, and what it does. Internal to compiler_flags.cpp.

#include <kcache/cachekey/compiler_flags.h>

#include <optional>
#include <span>
#include <string_view>

namespace kcache::cachekey::flags {

enum class ArgForm {
  kNone,             // "-G"
  kJoined,           // "-O2": the value follows the name directly (maybe empty)
  kEquals,           // "--std=c++17" or "--std c++17"
  kJoinedOrSeparate, // "-DX", "-D X", "--define-macro=X", "--define-macro X"
  kSeparate,         // "-Xclang X": always two arguments
};

// One flag: the spelling kcache renders and an alias that means the same
// ("--ptxas-options" / "-Xptxas"); "" when there is none.
struct FlagSpec {
  std::string_view canonical;
  std::string_view alias;
  ArgForm form;
  FlagRole role;
};

// Looked up in order: the first spec with a matching spelling wins, so longer
// spellings come before their prefixes ("-isystem-after" before "-isystem").
std::span<const FlagSpec> table(FlagFamily family);

// Flags described by a rule rather than a list ("-W...", "-f...", "-m...").
// Returns the role of a one-argument flag the table did not match.
std::optional<FlagRole> rule_role(FlagFamily family, std::string_view token);

// An option outside the tables that takes the next argument as its value
// ("-ftrapv-handler NAME"): kcache does not know what it does, so a spec may
// not use it and a client key keeps it, with its argument, verbatim.
bool takes_argument_by_rule(FlagFamily family, std::string_view token);

} // namespace kcache::cachekey::flags
