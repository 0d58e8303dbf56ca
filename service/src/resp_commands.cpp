#include "resp_commands.h"

#include "scopes.h"

#include <kcache/protocol/wire.h>
#include <kcache/service/lease_table.h>
#include <kcache/storage/redis_client.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

namespace kcache::service {

namespace {

void simple(std::string& out, std::string_view text) {
  out.append("+").append(text).append("\r\n");
}

void error_reply(std::string& out, std::string_view text) {
  out.append("-").append(text).append("\r\n");
}

void integer(std::string& out, std::int64_t value) {
  out.append(":").append(std::to_string(value)).append("\r\n");
}

void bulk(std::string& out, std::string_view data) {
  out.append("$").append(std::to_string(data.size())).append("\r\n").append(data).append("\r\n");
}

void nil(std::string& out, bool resp3) {
  out.append(resp3 ? "_\r\n" : "$-1\r\n");
}

void array_header(std::string& out, std::size_t n) {
  out.append("*").append(std::to_string(n)).append("\r\n");
}

std::string upper(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

bool key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '+' || c == '-';
}

std::optional<std::int64_t> positive(std::string_view text) {
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v <= 0) {
    return std::nullopt;
  }
  return v;
}

// The commands counted by name; any other is counted as "other", so a
// client cannot grow the metric's label set.
constexpr std::array<std::string_view, 18> kKnown = {
    "PING", "ECHO", "QUIT", "HELLO", "AUTH", "SELECT", "CLIENT", "CONFIG", "COMMAND",
    "INFO", "GET",  "MGET", "SET",   "DEL",  "UNLINK", "EXISTS", "TTL",    "PTTL"};

static_assert(RespCommands::kCountedCommands == kKnown.size() + 1, "kKnown and \"other\"");

constexpr std::string_view kNoAuth = "NOAUTH Authentication required.";

} // namespace

RespCommands::RespCommands(storage::Store& store, const storage::RecordSigner* signer,
                           std::vector<Token> tokens, std::string ns, std::uint64_t max_value_bytes,
                           MetricsRegistry& metrics, LeaseTable* leases)
    : store_(store), artifacts_(store, signer), tokens_(std::move(tokens)), ns_(std::move(ns)),
      max_value_bytes_(max_value_bytes), metrics_(metrics), leases_(leases),
      protocol_errors_(metrics.counter("kcache_resp_protocol_errors_total",
                                       "RESP connections closed on a malformed request")),
      hit_copies_(metrics, "resp") {
  for (const Token& token : tokens_) {
    principals_.push_back(Principal::of(token));
  }
}

bool RespCommands::valid_namespace(std::string_view ns) {
  return !ns.empty() && ns.size() <= 128 &&
         std::all_of(ns.begin(), ns.end(), [](char c) { return key_char(c) && c != ':'; });
}

std::optional<std::string> RespCommands::kcache_key(std::string_view ns, std::string_view key) {
  static constexpr std::string_view kHex = "0123456789ABCDEF";
  std::string out = "resp:" + std::string(ns) + ":";
  for (const char c : key) {
    if (key_char(c)) {
      out += c;
    } else {
      const auto b = static_cast<unsigned char>(c);
      out += '=';
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
    if (out.size() > 512) {
      return std::nullopt;
    }
  }
  return out;
}

RespSession RespCommands::open() const {
  return {tokens_.empty() ? &anonymous_ : nullptr, false};
}

void RespCommands::count(std::string_view command, bool ok) {
  const auto known = std::find(kKnown.begin(), kKnown.end(), command);
  const auto slot = static_cast<std::size_t>(known - kKnown.begin()) * 2 + (ok ? 0 : 1);
  // Looked up once per name and outcome (a registry lookup builds label
  // strings and takes its lock), on first use: a series appears once counted.
  Counter* counter = command_counters_[slot].load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter =
        &metrics_.counter("kcache_resp_commands_total", "RESP commands by name and outcome",
                          {{"command", known != kKnown.end() ? std::string(command) : "other"},
                           {"outcome", ok ? "ok" : "error"}});
    command_counters_[slot].store(counter, std::memory_order_release);
  }
  counter->inc();
}

void RespCommands::protocol_error(const std::string& message, std::string& out) {
  protocol_errors_.inc();
  error_reply(out, "ERR " + message);
}

void RespCommands::execute(const std::vector<std::string>& args, RespSession& session,
                           RespOut& out) {
  const storage::RedisCallScope redis_calls; // a hung Redis node costs this command one timeout
  const std::string name = upper(args.at(0));
  if ((name != "GET" && name != "MGET") || session.who == nullptr) {
    execute(args, session, out.text());
    return;
  }
  if (args.size() < 2 || (name == "GET" && args.size() > 2)) {
    error_reply(out.text(),
                "ERR wrong number of arguments for '" + std::string(args[0]) + "' command");
    count(name, false);
    return;
  }
  if (name == "GET") {
    count(name, get(args[1], session, out, false));
    return;
  }
  array_header(out.text(), args.size() - 1);
  for (std::size_t i = 1; i < args.size(); ++i) {
    // An error for one key (a refused read) is a nil in MGET, as Redis
    // answers nil for a key of the wrong type.
    get(args[i], session, out, true);
  }
  count(name, true);
}

void RespCommands::execute(const std::vector<std::string>& args, RespSession& session,
                           std::string& out) {
  const std::string name = upper(args.at(0));
  const std::size_t before = out.size();
  auto arity = [&](std::size_t min, std::size_t max) {
    if (args.size() < min || args.size() > max) {
      error_reply(out, "ERR wrong number of arguments for '" + std::string(args[0]) + "' command");
      return false;
    }
    return true;
  };
  if (name == "PING") {
    if (arity(1, 2)) {
      args.size() == 2 ? bulk(out, args[1]) : simple(out, "PONG");
    }
  } else if (name == "QUIT") {
    simple(out, "OK");
    session.quit = true;
  } else if (name == "AUTH") {
    if (arity(2, 3)) {
      auth(args.size() == 3 ? args[1] : "", args.back(), session, out);
    }
  } else if (name == "HELLO") {
    hello(args, session, out);
  } else if (session.who == nullptr) {
    error_reply(out, kNoAuth);
  } else if (name == "ECHO") {
    if (arity(2, 2)) {
      bulk(out, args[1]);
    }
  } else if (name == "SELECT") {
    if (arity(2, 2)) {
      args[1] == "0" ? simple(out, "OK") : error_reply(out, "ERR DB index is out of range");
    }
  } else if (name == "CLIENT") {
    simple(out, "OK"); // SETNAME, SETINFO (redis-py on connect): nothing to keep
  } else if (name == "CONFIG" || name == "COMMAND") {
    array_header(out, 0); // redis-benchmark and redis-cli ask; nothing to tell
  } else if (name == "INFO") {
    bulk(out, "# Server\r\nredis_version:7.0.0\r\nkcached_version:" KCACHE_VERSION "\r\n");
  } else if (name == "GET" || name == "MGET") {
    RespOut reply;
    execute(args, session, reply);
    out.append(reply.flat());
    return; // counted there
  } else if (name == "SET") {
    set(args, session, out);
  } else if (name == "DEL" || name == "UNLINK") {
    if (arity(2, args.size())) {
      del(args, *session.who, out);
    }
  } else if (name == "EXISTS") {
    if (arity(2, args.size())) {
      std::int64_t n = 0;
      std::string reply;
      for (std::size_t i = 1; i < args.size() && reply.empty(); ++i) {
        if (auto found = exists(args[i], *session.who, reply); found && *found) {
          ++n;
        }
      }
      if (reply.empty()) {
        integer(out, n);
      } else {
        out.append(reply);
      }
    }
  } else if (name == "TTL" || name == "PTTL") {
    // Entries have no expiry of their own: the cache's eviction ends them.
    if (arity(2, 2)) {
      std::string reply;
      if (auto found = exists(args[1], *session.who, reply)) {
        integer(out, *found ? -1 : -2);
      } else {
        out.append(reply);
      }
    }
  } else {
    std::string start;
    for (std::size_t i = 1; i < args.size() && start.size() < 128; ++i) {
      start += "'" + args[i].substr(0, 64) + "' ";
    }
    error_reply(out, "ERR unknown command '" + args[0].substr(0, 64) +
                         "', with args beginning with: " + start);
  }
  count(name, out.size() == before || out[before] != '-');
}

void RespCommands::auth(std::string_view user, std::string_view password, RespSession& session,
                        std::string& out) {
  if (tokens_.empty()) {
    error_reply(out, "ERR AUTH <password> called without any password configured for the "
                     "default user. Are you sure your configuration is correct?");
    return;
  }
  const Token* token = find_token(tokens_, password);
  // The user name, when given, is "default" or the token's own name.
  if (token == nullptr || (!user.empty() && user != "default" && user != token->name)) {
    spdlog::info("RESP: refused an AUTH (unknown token or user name)");
    error_reply(out, "WRONGPASS invalid username-password pair or user is disabled.");
    return;
  }
  session.who = &principals_[static_cast<std::size_t>(token - tokens_.data())];
  simple(out, "OK");
}

void RespCommands::hello(const std::vector<std::string>& args, RespSession& session,
                         std::string& out) {
  std::size_t i = 1;
  if (args.size() > 1) {
    if (args[1] != "2" && args[1] != "3") {
      error_reply(out, "NOPROTO unsupported protocol version");
      return;
    }
    ++i;
  }
  for (; i < args.size(); ++i) {
    const std::string option = upper(args[i]);
    if (option == "AUTH" && i + 2 < args.size()) {
      std::string reply;
      auth(args[i + 1], args[i + 2], session, reply);
      if (reply.starts_with("-")) {
        out.append(reply);
        return;
      }
      i += 2;
    } else if (option == "SETNAME" && i + 1 < args.size()) {
      ++i;
    } else {
      error_reply(out, "ERR Syntax error in HELLO option '" + args[i].substr(0, 64) + "'");
      return;
    }
  }
  if (session.who == nullptr) {
    error_reply(out, kNoAuth);
    return;
  }
  // RESP3 (redis-py 8's default): the replies kcached sends are the same in
  // both but the null; HELLO's own reply is a map there.
  session.resp3 = args.size() > 1 && args[1] == "3";
  out.append(session.resp3 ? "%7\r\n" : "*14\r\n");
  for (const auto& [field, value] :
       std::array<std::pair<std::string_view, std::string_view>, 6>{{{"server", "kcached"},
                                                                     {"version", KCACHE_VERSION},
                                                                     {"mode", "standalone"},
                                                                     {"role", "master"},
                                                                     {"proto", ""},
                                                                     {"id", ""}}}) {
    bulk(out, field);
    if (field == "proto") {
      integer(out, session.resp3 ? 3 : 2);
    } else if (field == "id") {
      integer(out, 0);
    } else {
      bulk(out, value);
    }
  }
  bulk(out, "modules");
  array_header(out, 0);
}

bool RespCommands::get(std::string_view resp_key, const RespSession& session, RespOut& out,
                       bool error_as_nil) {
  auto fail = [&](const std::string& message) {
    error_as_nil ? nil(out.text(), session.resp3) : error_reply(out.text(), message);
    return false;
  };
  const Principal& who = *session.who;
  const auto key = kcache_key(ns_, resp_key);
  if (!key) {
    nil(out.text(), session.resp3); // too long to have been stored
    return true;
  }
  if (!may_read_key(who, artifacts_, *key)) {
    return fail("NOPERM this token may not read namespace '" + ns_ + "'");
  }
  auto found = artifacts_.get(*key);
  if (!found) {
    spdlog::warn("RESP GET {}: {}", *key, found.error().message);
    return fail("ERR storage error");
  }
  if (!found->has_value()) {
    nil(out.text(), session.resp3);
    return true;
  }
  if ((*found)->files.size() != 1) {
    return fail("WRONGTYPE the entry holds " + std::to_string((*found)->files.size()) +
                " files, not one value");
  }
  storage::SharedBytes& value = (*found)->files.front().data;
  const std::size_t size = value.size();
  hit_copies_.count(size, out.bulk(std::move(value))); // a large value is referenced, not copied
  return true;
}

std::optional<bool> RespCommands::exists(std::string_view resp_key, const Principal& who,
                                         std::string& out) {
  const auto key = kcache_key(ns_, resp_key);
  if (!key) {
    return false;
  }
  if (!may_read_key(who, artifacts_, *key)) {
    error_reply(out, "NOPERM this token may not read namespace '" + ns_ + "'");
    return std::nullopt;
  }
  auto record = artifacts_.get_record(*key);
  if (!record) {
    error_reply(out, "ERR storage error");
    return std::nullopt;
  }
  return record->has_value();
}

void RespCommands::set(const std::vector<std::string>& args, const RespSession& session,
                       std::string& out) {
  const Principal& who = *session.who;
  if (args.size() < 3) {
    error_reply(out, "ERR wrong number of arguments for 'set' command");
    return;
  }
  // EX/PX are accepted and not kept: entries live until the cache evicts them.
  bool nx = false;
  bool xx = false;
  for (std::size_t i = 3; i < args.size(); ++i) {
    const std::string option = upper(args[i]);
    if ((option == "EX" || option == "PX") && i + 1 < args.size()) {
      if (!positive(args[++i])) {
        error_reply(out, "ERR invalid expire time in 'set' command");
        return;
      }
    } else if (option == "NX") {
      nx = true;
    } else if (option == "XX") {
      xx = true;
    } else {
      error_reply(out, "ERR syntax error");
      return;
    }
  }
  if (nx && xx) {
    error_reply(out, "ERR syntax error");
    return;
  }
  const auto key = kcache_key(ns_, args[1]);
  if (!key) {
    error_reply(out, "ERR key too long for kcache (512 characters, escapes included)");
    return;
  }
  if (args[2].size() > max_value_bytes_) {
    error_reply(out, "ERR value larger than kcached's max_body_bytes");
    return;
  }
  if (auto refused = write_refusal(who, *key, nullptr)) {
    error_reply(out, "NOPERM " + *refused);
    return;
  }
  if (nx || xx) {
    // Not atomic: two NX writers may both store, each a whole, valid value.
    std::string reply;
    const auto found = exists(args[1], who, reply);
    if (!found) {
      out.append(reply);
      return;
    }
    if (*found == nx) {
      nil(out, session.resp3);
      return;
    }
  }
  std::vector<storage::ArtifactFile> files;
  files.push_back({"value", args[2]});
  auto stored = artifacts_.put(*key, std::move(files), "resp", {}, who.name);
  if (!stored) {
    spdlog::warn("RESP SET {}: {}", *key, stored.error().message);
    error_reply(out, "ERR storage error: " + stored.error().message);
    return;
  }
  if (leases_ != nullptr) {
    leases_->notify_put(*key); // HTTP gets waiting on the key's lease hit now
  }
  simple(out, "OK");
}

void RespCommands::del(const std::vector<std::string>& args, const Principal& who,
                       std::string& out) {
  std::int64_t removed = 0;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const auto key = kcache_key(ns_, args[i]);
    if (!key) {
      continue;
    }
    // As DELETE /v1/ac: admin in the key's namespace.
    if (auto refused = stored_write_refusal(who, artifacts_, *key, Role::kAdmin)) {
      error_reply(out, "NOPERM " + *refused);
      return;
    }
    auto record = artifacts_.get_record(*key);
    if (!record) {
      error_reply(out, "ERR storage error");
      return;
    }
    if (!record->has_value()) {
      continue;
    }
    if (auto ok = store_.remove(storage::Area::kAction, *key); !ok) {
      error_reply(out, "ERR storage error");
      return;
    }
    ++removed;
  }
  integer(out, removed);
}

} // namespace kcache::service
