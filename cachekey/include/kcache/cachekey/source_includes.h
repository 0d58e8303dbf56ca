#pragma once
// What a C/C++/CUDA source would make the preprocessor read from disk (for
// kcached's hermetic-spec check and the clients' header packing):
// #include, #include_next, #import, #embed, __has_include, __has_embed and
// "#pragma GCC dependency", plus assembler .include/.incbin in inline asm.
// The scan follows the phases that decide what a directive is (line splices,
// comments, string, character and raw string literals, digraphs), so a
// directive cannot hide from it; what it cannot read as a literal header name
// (a computed #include) is refused rather than guessed.

#include <tl/expected.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kcache::cachekey {

struct IncludeRef {
  std::string name; // as written between the quotes or brackets
  bool angled = false;
  int line = 0;
};

// Every header name the source refers to, or why the source is refused.
tl::expected<std::vector<IncludeRef>, std::string> scan_includes(std::string_view file_name,
                                                                 std::string_view text);

// A header name or spec file name that stays inside the spec: relative, no
// "..", no backslash, no NUL, not empty. Returns why not.
tl::expected<void, std::string> check_relative_name(std::string_view name);

} // namespace kcache::cachekey
