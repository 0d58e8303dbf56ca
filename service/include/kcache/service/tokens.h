#pragma once
// Bearer tokens: who a request acts as, and what it may do in which namespace.
//
// kcached keeps each configured token's SHA-256 only (config.h's Token). A
// presented token is hashed and compared against every configured digest in
// constant time, all of them each time: neither the time to refuse nor the
// time to accept says how much of a token matched, or which one.
//
// A token's role in namespace N is the highest role among its grants whose
// pattern matches N (key_namespace.h's glob_match); `role = "write"` is the
// grant {"*" = "write"}.

#include <kcache/service/config.h>

#include <tl/expected.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::service {

using TokenDigest = std::array<std::uint8_t, 32>;

// The identity a request acts as, and its roles per namespace pattern.
struct Principal {
  std::string name; // the token's name; "anonymous" when no tokens are configured
  std::vector<RoleGrant> roles;

  // No tokens configured: everyone is an admin everywhere (local use).
  static Principal anonymous();
  static Principal of(const Token& token) { return {token.name, token.roles}; }

  // The highest role among the grants matching `ns`; nullopt: none.
  std::optional<Role> role_in(std::string_view ns) const;
  bool may(Role need, std::string_view ns) const;
  // The role in some namespace: what the route table's minimum asks for.
  bool may_somewhere(Role need) const;
  // A grant of `need` (or higher) on the pattern "*": every namespace, and
  // the keys of none (CAS deletes, gc, verify, writes of kcc- keys).
  bool may_everywhere(Role need) const;
};

TokenDigest token_digest(std::string_view token);
// A Token for `plaintext` (tests, tools): no strength check; the config's are.
Token make_token(std::string name, std::string_view plaintext, std::vector<RoleGrant> roles);
// CRYPTO_memcmp: the time does not depend on where the digests differ.
bool digests_equal(const TokenDigest& a, const TokenDigest& b);
// The configured token whose digest the presented token's SHA-256 equals,
// or null. Compares against every token, without stopping at a match.
const Token* find_token(std::span<const Token> tokens, std::string_view presented);

// The token of an "Authorization: Bearer <token>" value (the scheme is
// case-insensitive, RFC 7235); nullopt when it is not one.
std::optional<std::string_view> bearer_token(std::string_view authorization);

// Estimated bits of entropy of a plaintext token (tokens.cpp says how).
double token_entropy_bits(std::string_view token);
inline constexpr double kMinTokenBits = 128;
// Whether `token` is one of the example config's placeholders (old or new).
bool is_placeholder_token(std::string_view token);

// [[tokens]] tables of a TOML document (a config or a token file). `source`
// names the file in messages; a plaintext `token` is allowed only when the
// file is not group/world readable (`source_private`). Checks each token's
// strength and placeholders; names default to "token-<first_index + i>".
tl::expected<std::vector<Token>, std::string> parse_token_file_text(std::string_view text,
                                                                    std::string_view source,
                                                                    bool source_private,
                                                                    std::size_t first_index = 0);
// A token_file: refused when group or world may read it.
tl::expected<std::vector<Token>, std::string> load_token_file(const std::string& path,
                                                              std::size_t first_index = 0);
// Whether `path` is readable (or writable) by its owner only; an error when
// it cannot be stat'ed.
tl::expected<bool, std::string> file_is_private(const std::string& path);
// Names are identities: two tokens of one name, or one digest twice, are refused.
tl::expected<void, std::string> check_unique_tokens(std::span<const Token> tokens);

} // namespace kcache::service
