// Token rules: digests, the constant-time lookup, the Authorization header,
// the strength and placeholder checks, and [[tokens]] tables.

#include "token_config.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/service/key_namespace.h>
#include <kcache/service/settings.h>
#include <kcache/service/tokens.h>

#include <openssl/crypto.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>

namespace kcache::service {

namespace {

tl::unexpected<std::string> fail(std::string message) {
  return tl::unexpected(std::move(message));
}

// The plaintext tokens deploy/kcached.toml used to ship (they worked as
// tokens): a config holding one of their digests is refused too.
constexpr std::array<std::string_view, 4> kOldPlaceholders = {
    "replace-with-a-reader-token", "replace-with-a-ci-token", "replace-with-a-trainer-token",
    "replace-with-an-admin-token"};

bool printable_without_space(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

} // namespace

Principal Principal::anonymous() {
  return {"anonymous", {{"*", Role::kAdmin}}};
}

std::optional<Role> Principal::role_in(std::string_view ns) const {
  std::optional<Role> best;
  for (const RoleGrant& grant : roles) {
    if ((!best || grant.role > *best) && glob_match(grant.pattern, ns)) {
      best = grant.role;
    }
  }
  return best;
}

bool Principal::may(Role need, std::string_view ns) const {
  const auto role = role_in(ns);
  return role && *role >= need;
}

bool Principal::may_somewhere(Role need) const {
  return std::any_of(roles.begin(), roles.end(),
                     [&](const RoleGrant& grant) { return grant.role >= need; });
}

bool Principal::may_everywhere(Role need) const {
  return std::any_of(roles.begin(), roles.end(), [&](const RoleGrant& grant) {
    return grant.role >= need && grant.pattern == "*";
  });
}

TokenDigest token_digest(std::string_view token) {
  return cachekey::Sha256::of(token);
}

Token make_token(std::string name, std::string_view plaintext, std::vector<RoleGrant> roles) {
  return {std::move(name), token_digest(plaintext), std::move(roles)};
}

bool digests_equal(const TokenDigest& a, const TokenDigest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

const Token* find_token(std::span<const Token> tokens, std::string_view presented) {
  const TokenDigest digest = token_digest(presented);
  const Token* found = nullptr;
  // Every digest is compared, a match or not: the time taken depends on the
  // number of tokens only. (Digests are unique: check_unique_tokens.)
  for (const Token& token : tokens) {
    const bool equal = digests_equal(digest, token.sha256);
    found = equal ? &token : found;
  }
  return found;
}

std::optional<std::string_view> bearer_token(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), authorization.begin(),
                  [](char a, char b) { return a == (b >= 'A' && b <= 'Z' ? b - 'A' + 'a' : b); })) {
    return std::nullopt;
  }
  std::string_view rest = authorization.substr(kScheme.size());
  if (rest.front() != ' ') {
    return std::nullopt;
  }
  rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) {
    rest.remove_suffix(1);
  }
  if (rest.empty() || rest.find_first_of(" \t") != std::string_view::npos) {
    return std::nullopt;
  }
  return rest;
}

// An estimate, not a measurement: a token is scored as if its characters were
// drawn at random from the alphabet its character classes make up (hex digits
// alone: 16; otherwise digits 10, lowercase 26, uppercase 26, '-' and '_' 2,
// other printable ASCII 32), so length x log2(alphabet). That is exact for
// what `kcache token new`, `openssl rand -hex 16` or a password manager
// makes, and an upper bound for what a person chose. Each character is also
// capped at log2(distinct characters) + 2 bits, and at log2(distinct) with
// fewer than 8 distinct characters: a random token of 22+ characters uses
// most of its alphabet (32 hex digits show ~14 distinct, 22 base64url ~19),
// so real ones keep their score while "aaaa...a" or "abab...ab" score low.
// A long passphrase of words still passes: the estimate cannot know English;
// refusing short and repetitive tokens and the example's placeholders is
// what it is for.
double token_entropy_bits(std::string_view token) {
  if (token.empty()) {
    return 0;
  }
  bool digit = false, lower = false, upper = false, url = false, other = false, hex = true,
       hex_upper = true;
  std::set<char> distinct;
  for (const char c : token) {
    distinct.insert(c);
    const bool is_digit = c >= '0' && c <= '9';
    digit |= is_digit;
    lower |= c >= 'a' && c <= 'z';
    upper |= c >= 'A' && c <= 'Z';
    url |= c == '-' || c == '_';
    other |=
        !(is_digit || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_');
    hex &= is_digit || (c >= 'a' && c <= 'f');
    hex_upper &= is_digit || (c >= 'A' && c <= 'F');
  }
  double alphabet = 0;
  if (hex || hex_upper) {
    alphabet = 16;
  } else {
    alphabet =
        (digit ? 10 : 0) + (lower ? 26 : 0) + (upper ? 26 : 0) + (url ? 2 : 0) + (other ? 32 : 0);
  }
  const double variety = std::log2(static_cast<double>(distinct.size()));
  const double per_char =
      std::min(std::log2(alphabet), distinct.size() < 8 ? variety : variety + 2);
  return per_char * static_cast<double>(token.size());
}

// The shipped plaintext placeholders (kOldPlaceholders) start with
// "replace-with-" too; the sha256 field is checked by the same text rule.
bool is_placeholder_token(std::string_view token) {
  return token.starts_with("replace-with-") || token.starts_with("<replace") ||
         token.find("kcache token new") != std::string_view::npos;
}

tl::expected<std::vector<Token>, std::string> tokens_from_toml(const toml::table& doc,
                                                               std::string_view source,
                                                               bool source_private,
                                                               std::size_t first_index) {
  std::vector<Token> out;
  const toml::node* node = doc.get("tokens");
  if (node == nullptr) {
    return out;
  }
  const toml::array* tables = node->as_array();
  if (tables == nullptr) {
    return fail(std::string(source) + ": tokens must be [[tokens]] tables");
  }
  const std::string where(source);
  for (std::size_t i = 0; i < tables->size(); ++i) {
    const toml::table* t = (*tables)[i].as_table();
    if (t == nullptr) {
      return fail(where + ": tokens must be [[tokens]] tables");
    }
    Token token;
    token.name = "token-" + std::to_string(first_index + i);
    if (const toml::node* name = t->get("name")) {
      if (!name->is_string() || name->value<std::string>()->empty()) {
        return fail(where + ": [[tokens]] #" + std::to_string(i + 1) +
                    ": name must be a non-empty string");
      }
      token.name = *name->value<std::string>();
    }
    const std::string what = where + ": token '" + token.name + "'";
    // A misspelt key (rle = "admin") must not pass unnoticed (settings.h).
    for (const auto& [key, value] : *t) {
      const auto keys = token_keys();
      if (std::find(keys.begin(), keys.end(), key.str()) == keys.end()) {
        std::string message = what + ": unknown key " + std::string(key.str());
        if (const std::string_view close = closest_name(key.str(), keys); !close.empty()) {
          message.append(" (did you mean ").append(close).append("?)");
        }
        return fail(message.append("; [[tokens]] take name, sha256, token, role, roles"));
      }
    }
    const auto digest = (*t)["sha256"].value<std::string>();
    const auto plain = (*t)["token"].value<std::string>();
    if (digest.has_value() == plain.has_value()) {
      return fail(what + ": give one of sha256 = \"<64 hex>\" (`kcache token new` prints it) or "
                         "token = \"<plaintext>\"");
    }
    if (digest) {
      if (is_placeholder_token(*digest)) {
        return fail(what + ": sha256 is still the example's placeholder; run `kcache token new` "
                           "and put its sha256 line here");
      }
      const auto parsed = cachekey::digest_from_hex(*digest);
      if (!parsed) {
        return fail(what + ": sha256 must be 64 hex digits (the SHA-256 of the token)");
      }
      token.sha256 = *parsed;
      for (const std::string_view old : kOldPlaceholders) {
        if (digests_equal(token.sha256, token_digest(old))) {
          return fail(what + ": sha256 is the digest of the example's placeholder '" +
                      std::string(old) + "'; run `kcache token new`");
        }
      }
    } else {
      if (!source_private) {
        std::string message = what;
        message += ": a plaintext token in a file that group or others may read; run `chmod 600 ";
        message += where;
        message += "`, or keep its sha256 = \"...\" instead of token = \"...\"";
        return fail(std::move(message));
      }
      if (is_placeholder_token(*plain)) {
        return fail(what + ": token is the example's placeholder '" + *plain +
                    "'; run `kcache token new` and use its sha256 line");
      }
      if (!printable_without_space(*plain)) {
        return fail(what + ": token must be printable ASCII without spaces (it is sent in an "
                           "HTTP header)");
      }
      if (const double bits = token_entropy_bits(*plain); bits < kMinTokenBits) {
        return fail(what + ": token is too weak (about " + std::to_string(static_cast<int>(bits)) +
                    " bits, at least " + std::to_string(static_cast<int>(kMinTokenBits)) +
                    " needed); `kcache token new` makes a 256-bit one");
      }
      token.sha256 = token_digest(*plain);
    }
    const toml::node* role = t->get("role");
    const toml::node* roles = t->get("roles");
    if ((role == nullptr) == (roles == nullptr)) {
      return fail(what + ": give one of role = \"read\" or roles = { \"team-a*\" = \"write\", "
                         "\"*\" = \"read\" }");
    }
    if (role != nullptr) {
      if (!role->is_string()) {
        return fail(what + ": role must be a string");
      }
      auto parsed = parse_role(*role->value<std::string>());
      if (!parsed) {
        return fail(what + ": " + parsed.error());
      }
      token.roles.push_back({"*", *parsed});
    } else {
      const toml::table* patterns = roles->as_table();
      if (patterns == nullptr || patterns->empty()) {
        return fail(what + ": roles must be a table of namespace pattern = role");
      }
      for (const auto& [pattern, value] : *patterns) {
        const auto name = value.value<std::string>();
        if (!name) {
          return fail(what + ": roles." + std::string(pattern.str()) + " must be a role name");
        }
        auto parsed = parse_role(*name);
        if (!parsed) {
          return fail(what + ": roles." + std::string(pattern.str()) + ": " + parsed.error());
        }
        token.roles.push_back({std::string(pattern.str()), *parsed});
      }
    }
    out.push_back(std::move(token));
  }
  return out;
}

namespace {

// A token file holds [[tokens]] only; any other key is a mistake to report.
tl::expected<void, std::string> only_tokens(const toml::table& doc, std::string_view source) {
  for (const auto& [key, value] : doc) {
    if (key.str() != "tokens") {
      return fail(std::string(source) + ": unknown key " + std::string(key.str()) +
                  ": a token file holds [[tokens]] tables only");
    }
  }
  return {};
}

} // namespace

tl::expected<std::vector<Token>, std::string> parse_token_file_text(std::string_view text,
                                                                    std::string_view source,
                                                                    bool source_private,
                                                                    std::size_t first_index) {
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return fail(std::string(source) + ": " + std::string(e.description()));
  }
  if (auto only = only_tokens(doc, source); !only) {
    return tl::unexpected(only.error());
  }
  return tokens_from_toml(doc, source, source_private, first_index);
}

tl::expected<bool, std::string> file_is_private(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return fail(path + ": " + std::strerror(errno));
  }
  return (st.st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)) == 0;
}

tl::expected<std::vector<Token>, std::string> load_token_file(const std::string& path,
                                                              std::size_t first_index) {
  auto is_private = file_is_private(path);
  if (!is_private) {
    return fail("token_file " + is_private.error());
  }
  if (!*is_private) {
    return fail("token_file " + path + " may be read by group or others; run `chmod 600 " + path +
                "`");
  }
  toml::table doc;
  try {
    doc = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return fail(path + ": " + std::string(e.description()));
  }
  if (auto only = only_tokens(doc, path); !only) {
    return tl::unexpected(only.error());
  }
  return tokens_from_toml(doc, path, true, first_index);
}

tl::expected<void, std::string> check_unique_tokens(std::span<const Token> tokens) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (tokens[i].name == tokens[j].name) {
        return fail("two tokens are named '" + tokens[i].name + "': names are identities");
      }
      if (digests_equal(tokens[i].sha256, tokens[j].sha256)) {
        return fail("tokens '" + tokens[j].name + "' and '" + tokens[i].name +
                    "' are the same token");
      }
    }
  }
  return {};
}

} // namespace kcache::service
