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

struct FlagSpec {
  std::string_view spelling;  // as written on a command line
  std::string_view canonical; // the spelling kcache renders
  ArgForm form;
  FlagRole role;
};

// Looked up in order: the first spec whose spelling matches wins, so longer
// spellings come before their prefixes ("-save-temps" before "-s...").
std::span<const FlagSpec> table(FlagFamily family);

// Flags described by a rule rather than a list ("-W...", "-f...", "-m...").
// Returns the role of a one-argument flag the table did not match.
std::optional<FlagRole> rule_role(FlagFamily family, std::string_view token);

} // namespace kcache::cachekey::flags
