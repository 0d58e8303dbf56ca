// `kcache show`'s origin of an entry (issue 14): who wrote it, the producer,
// when it was signed and by which key, and whether that signature verifies
// against --trusted-keys (or "not checked" without them).

#include "cli.h"
#include "table.h"

#include <kcache/protocol/record_signature.h>

#include <cstdio>
#include <ctime>

namespace kcache::cli {
namespace {

std::string utc_time(std::int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

} // namespace

json record_origin(const Cli& cli, std::string_view key, const std::string& record_json) {
  const json record = parse_json_or_discarded(record_json);
  auto fields = protocol::record_fields_from_json(record);
  if (!fields) {
    return json{{"verification", "malformed"}, {"detail", fields.error().message}};
  }
  json out{{"writer", fields->writer},
           {"namespace", fields->ns},
           {"producer", fields->producer},
           {"signed_ms", fields->created_ms}};
  const auto sig = record.find("signature");
  if (sig == record.end() || sig->is_null()) {
    out["verification"] = "unsigned";
    return out;
  }
  auto signature = protocol::record_signature_from_json(*sig);
  if (!signature) {
    out["verification"] = "malformed";
    out["detail"] = signature.error().message;
    return out;
  }
  out["key_id"] = signature->key_id;
  out["alg"] = signature->alg;
  const std::vector<std::string>& paths = cli.client->options().trusted_keys;
  if (paths.empty()) {
    out["verification"] = "not checked";
    return out;
  }
  auto trusted = protocol::TrustedKeys::load(paths);
  if (!trusted) {
    out["verification"] = "not checked";
    out["detail"] = "trusted keys: " + trusted.error();
    return out;
  }
  auto verified = protocol::verify_record(key, record, *trusted);
  out["verification"] =
      verified ? "verified" : std::string(protocol::failure_name(verified.error().failure));
  if (!verified) {
    out["detail"] = verified.error().message;
  }
  return out;
}

void print_origin(const json& origin) {
  const std::int64_t now = unix_now_ms();
  const std::string verification = origin.value("verification", "");
  if (origin.contains("writer")) {
    std::printf("writer    %s\nnamespace %s\n", origin.value("writer", "").c_str(),
                origin.value("namespace", "").c_str());
  }
  if (origin.contains("key_id")) {
    const std::int64_t signed_ms = origin.value("signed_ms", std::int64_t{0});
    std::printf("signed    %s (%s) by key %s (%s)\n", utc_time(signed_ms).c_str(),
                format_age(signed_ms, now).c_str(), origin.value("key_id", "").c_str(),
                origin.value("alg", "").c_str());
  }
  std::string status = verification;
  if (verification == "verified") {
    status = "verified: signed by a trusted key";
  } else if (verification == "not checked") {
    status = "not checked (give --trusted-keys PEM or $KCACHE_TRUSTED_KEYS)";
  } else {
    status = "NOT VERIFIED: " + verification;
  }
  if (origin.contains("detail")) {
    status += " (" + origin.value("detail", "") + ")";
  }
  std::printf("signature %s\n", status.c_str());
}

} // namespace kcache::cli
