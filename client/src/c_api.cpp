// The C ABI over kcache::client::Client. No exception crosses it.

#include <kcache/client/client.h>
#include <kcache/client/pack_headers.h>
#include <kcache/kcache.h>
#include <kcache/protocol/admin.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

struct kcache_client {
  std::unique_ptr<kcache::client::Client> impl;
};

namespace {

using kcache::client::ClientError;
using kcache::client::ErrorCode;

// Per-thread, so concurrent callers never see each other's messages.
thread_local std::string t_last_error;

kcache_status fail(kcache_status status, std::string message) {
  t_last_error = std::move(message);
  return status;
}

kcache_status to_status(const ClientError& e) {
  t_last_error = e.message;
  switch (e.code) {
  case ErrorCode::kUnavailable:
    return KCACHE_ERR_UNAVAILABLE;
  case ErrorCode::kTimeout:
    return KCACHE_ERR_TIMEOUT;
  case ErrorCode::kRejected:
    return KCACHE_ERR_REJECTED;
  case ErrorCode::kServer:
    return KCACHE_ERR_SERVER;
  case ErrorCode::kProtocol:
    return KCACHE_ERR_PROTOCOL;
  case ErrorCode::kInvalid:
    return KCACHE_ERR_INVALID;
  }
  return KCACHE_ERR_PROTOCOL;
}

bool fill(kcache_buffer* out, const std::string& bytes) {
  out->size = bytes.size();
  // malloc'ed so that any language's binding can hand it back to kcache_buffer_free.
  out->data = static_cast<uint8_t*>(std::malloc(bytes.empty() ? 1 : bytes.size())); // NOLINT
  if (out->data == nullptr) {
    out->size = 0;
    return false;
  }
  std::memcpy(out->data, bytes.data(), bytes.size());
  return true;
}

const std::string* value_file(const kcache::client::Artifact& artifact) {
  for (const auto& f : artifact.files) {
    if (f.name == "value") {
      return &f.data;
    }
  }
  return artifact.files.empty() ? nullptr : &artifact.files.front().data;
}

// {"producer", "metadata", "manifest"} as PutOptions (protocol/record_head.h).
tl::expected<kcache::client::PutOptions, std::string> put_options_from_json(const char* text) {
  const nlohmann::json doc = kcache::protocol::parse_json_or_discarded(text);
  if (doc.is_discarded() || !doc.is_object()) {
    return tl::unexpected(std::string("record_json is not a JSON object"));
  }
  return kcache::protocol::record_head_from_json(doc);
}

template <typename Fn> kcache_status guarded(Fn&& fn) {
  try {
    t_last_error.clear();
    return fn();
  } catch (const std::bad_alloc&) {
    return fail(KCACHE_ERR_PROTOCOL, "out of memory");
  } catch (const std::exception& e) {
    return fail(KCACHE_ERR_PROTOCOL, e.what());
  }
}

} // namespace

extern "C" {

int kcache_abi_version(void) {
  return KCACHE_ABI_VERSION;
}

const char* kcache_status_name(kcache_status status) {
  switch (status) {
  case KCACHE_OK:
    return "ok";
  case KCACHE_MISS:
    return "miss";
  case KCACHE_ERR_INVALID:
    return "invalid";
  case KCACHE_ERR_UNAVAILABLE:
    return "unavailable";
  case KCACHE_ERR_TIMEOUT:
    return "timeout";
  case KCACHE_ERR_REJECTED:
    return "rejected";
  case KCACHE_ERR_SERVER:
    return "server-error";
  case KCACHE_ERR_PROTOCOL:
    return "protocol";
  case KCACHE_PENDING:
    return "pending";
  case KCACHE_COMPILE_FAILED:
    return "compile-failed";
  case KCACHE_BUSY:
    return "busy";
  }
  return "unknown";
}

const char* kcache_last_error(void) {
  return t_last_error.c_str();
}

} // extern "C"

namespace {

// A field of kcache_options_ext if the caller's struct has it, else its
// environment variable, else "".
std::string ext_or_env(const kcache_options_ext* ext, const char* const kcache_options_ext::*field,
                       std::size_t field_end, const char* env) {
  if (ext != nullptr && ext->struct_size >= field_end && ext->*field != nullptr) {
    return ext->*field;
  }
  const char* value = std::getenv(env);
  return value != nullptr ? value : "";
}

tl::expected<bool, std::string> parse_flag(std::string_view name, std::string_view text) {
  if (text.empty() || text == "0" || text == "false" || text == "no" || text == "off") {
    return false;
  }
  if (text == "1" || text == "true" || text == "yes" || text == "on") {
    return true;
  }
  return tl::unexpected(std::string(name) + "='" + std::string(text) + "' is not 0/1/true/false");
}

// "a:b:c" -> {"a", "b", "c"}, empty parts dropped (as PATH does).
std::vector<std::string> split_paths(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto colon = text.find(':');
    if (colon != 0) {
      out.emplace_back(text.substr(0, colon));
    }
    text = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  }
  return out;
}

// End-to-end verification (ABI 6): ext's fields, else $KCACHE_VERIFY_SIGNATURES
// and $KCACHE_TRUSTED_KEYS.
tl::expected<void, std::string> verification_options(const kcache_options_ext* ext,
                                                     kcache::client::ClientOptions& o) {
  o.trusted_keys = split_paths(ext_or_env(
      ext, &kcache_options_ext::trusted_keys,
      offsetof(kcache_options_ext, trusted_keys) + sizeof(const char*), "KCACHE_TRUSTED_KEYS"));
  const bool has_flag =
      ext != nullptr &&
      ext->struct_size >= offsetof(kcache_options_ext, verify_signatures) + sizeof(std::int32_t);
  if (has_flag && ext->verify_signatures != 0) {
    o.verify_signatures = ext->verify_signatures > 0;
    return {};
  }
  const char* env = std::getenv("KCACHE_VERIFY_SIGNATURES");
  auto verify = parse_flag("KCACHE_VERIFY_SIGNATURES", env != nullptr ? env : "");
  if (!verify) {
    return tl::unexpected(verify.error());
  }
  o.verify_signatures = *verify;
  return {};
}

} // namespace

extern "C" {

kcache_status kcache_client_open(const kcache_options* options, kcache_client** out) {
  return kcache_client_open_ext(options, nullptr, out);
}

kcache_status kcache_client_open_ext(const kcache_options* options, const kcache_options_ext* ext,
                                     kcache_client** out) {
  if (out == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_client_open: out is NULL");
  }
  *out = nullptr;
  return guarded([&] {
    kcache::client::ClientOptions o;
    const char* env_url = std::getenv("KCACHE_URL");
    if (options != nullptr && options->url != nullptr) {
      o.url = options->url;
    } else if (env_url != nullptr && *env_url != '\0') {
      o.url = env_url;
    }
    if (options != nullptr) {
      if (options->token != nullptr) {
        o.token = options->token;
      }
      if (options->timeout_ms > 0) {
        o.timeout = std::chrono::milliseconds(options->timeout_ms);
        o.connect_timeout = std::min(o.connect_timeout, o.timeout);
      }
      if (options->retries >= 0) {
        o.retries = options->retries;
      }
    }
    // TLS (ABI 6).
    o.ca_file =
        ext_or_env(ext, &kcache_options_ext::ca_file,
                   offsetof(kcache_options_ext, ca_file) + sizeof(const char*), "KCACHE_CA_FILE");
    o.client_cert_file = ext_or_env(
        ext, &kcache_options_ext::client_cert_file,
        offsetof(kcache_options_ext, client_cert_file) + sizeof(const char*), "KCACHE_CLIENT_CERT");
    o.client_key_file = ext_or_env(
        ext, &kcache_options_ext::client_key_file,
        offsetof(kcache_options_ext, client_key_file) + sizeof(const char*), "KCACHE_CLIENT_KEY");
    if (auto ok = verification_options(ext, o); !ok) {
      return fail(KCACHE_ERR_INVALID, "kcache_client_open: " + ok.error());
    }
    auto client = kcache::client::Client::create(std::move(o));
    if (!client) {
      return to_status(client.error());
    }
    auto handle = std::make_unique<kcache_client>();
    handle->impl = std::move(*client);
    *out = handle.release(); // ownership passes to the caller until kcache_client_close
    return KCACHE_OK;
  });
}

kcache_status kcache_verification_stats(kcache_client* client, kcache_buffer* json) {
  if (client == nullptr || json == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_verification_stats: NULL argument");
  }
  *json = kcache_buffer{nullptr, 0};
  return guarded([&] {
    const kcache::client::VerificationStats stats = client->impl->verification();
    nlohmann::json rejected = nlohmann::json::object();
    for (std::size_t i = 0; i < kcache::client::kRejectionCount; ++i) {
      rejected[std::string(kcache::client::rejection_name(
          static_cast<kcache::client::Rejection>(i)))] = stats.rejected[i];
    }
    const nlohmann::json doc{{"enabled", stats.enabled},
                             {"verified", stats.verified},
                             {"rejected", rejected},
                             {"rejected_total", stats.rejected_total()},
                             {"last_rejection", stats.last_rejection},
                             {"cache_hits", stats.cache_hits},
                             {"cache_misses", stats.cache_misses}};
    return fill(json, doc.dump()) ? KCACHE_OK : fail(KCACHE_ERR_PROTOCOL, "out of memory");
  });
}

void kcache_client_close(kcache_client* client) {
  std::unique_ptr<kcache_client> owned(client); // takes back what kcache_client_open gave out
}

kcache_status kcache_get(kcache_client* client, const char* key, kcache_buffer* value) {
  return kcache_get_wait(client, key, 0, value);
}

kcache_status kcache_put(kcache_client* client, const char* key, const uint8_t* data, size_t size) {
  if (client == nullptr || key == nullptr || (data == nullptr && size > 0)) {
    return fail(KCACHE_ERR_INVALID, "kcache_put: NULL argument");
  }
  return guarded([&] {
    std::string bytes(reinterpret_cast<const char*>(data), size);
    auto ok = client->impl->put(key, {{"value", std::move(bytes)}});
    return ok ? KCACHE_OK : to_status(ok.error());
  });
}

kcache_status kcache_exists(kcache_client* client, const char* key) {
  if (client == nullptr || key == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_exists: NULL argument");
  }
  return guarded([&] {
    auto found = client->impl->exists(key);
    if (!found) {
      return to_status(found.error());
    }
    return *found ? KCACHE_OK : KCACHE_MISS;
  });
}

kcache_status kcache_batch_get(kcache_client* client, const char* const* keys, size_t n,
                               kcache_buffer* values, kcache_status* statuses) {
  if (client == nullptr ||
      (n > 0 && (keys == nullptr || values == nullptr || statuses == nullptr))) {
    return fail(KCACHE_ERR_INVALID, "kcache_batch_get: NULL argument");
  }
  for (size_t i = 0; i < n; ++i) {
    values[i] = kcache_buffer{nullptr, 0};
    statuses[i] = KCACHE_MISS;
    if (keys[i] == nullptr) {
      return fail(KCACHE_ERR_INVALID, "kcache_batch_get: NULL key");
    }
  }
  return guarded([&] {
    std::vector<std::string> list(keys, keys + n);
    auto got = client->impl->batch_get(list);
    if (!got) {
      return to_status(got.error());
    }
    for (size_t i = 0; i < n; ++i) {
      const std::string* bytes = (*got)[i] ? value_file(*(*got)[i]) : nullptr;
      if (bytes != nullptr && fill(&values[i], *bytes)) {
        statuses[i] = KCACHE_OK;
      }
    }
    return KCACHE_OK;
  });
}

kcache_status kcache_stats(kcache_client* client, kcache_buffer* json) {
  if (client == nullptr || json == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_stats: NULL argument");
  }
  *json = kcache_buffer{nullptr, 0};
  return guarded([&] {
    auto stats = client->impl->stats();
    if (!stats) {
      return to_status(stats.error());
    }
    // The daemon's JSON again: the typed value renders through the same to_json.
    return fill(json, kcache::protocol::json_text(kcache::protocol::to_json(*stats)))
               ? KCACHE_OK
               : fail(KCACHE_ERR_PROTOCOL, "out of memory");
  });
}

kcache_status kcache_submit(kcache_client* client, const char* key, const char* spec_json,
                            int32_t priority, kcache_buffer* answer) {
  if (client == nullptr || spec_json == nullptr || answer == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_submit: NULL argument");
  }
  return kcache_submit_manifest(client, key, spec_json, nullptr, priority, answer);
}

kcache_status kcache_submit_manifest(kcache_client* client, const char* key, const char* spec_json,
                                     const char* manifest_json, int32_t priority,
                                     kcache_buffer* answer) {
  if (client == nullptr || spec_json == nullptr || answer == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_submit_manifest: NULL argument");
  }
  *answer = kcache_buffer{nullptr, 0};
  return guarded([&] {
    auto submitted =
        client->impl->submit(key == nullptr ? "" : key, spec_json, priority,
                             manifest_json == nullptr ? std::string_view() : manifest_json);
    if (!submitted) {
      return to_status(submitted.error());
    }
    nlohmann::json doc{{"status", submitted->status}, {"message", submitted->message}};
    if (submitted->job) {
      doc["job"] = kcache::protocol::parse_json_or_discarded(submitted->job->json);
    }
    // Where the result goes, and why not under the key when the token may not write it.
    kcache::protocol::add_publication(doc,
                                      {submitted->published_under, submitted->client_key_refused});
    if (!fill(answer, doc.dump())) {
      return fail(KCACHE_ERR_PROTOCOL, "out of memory");
    }
    return submitted->status == "busy" ? fail(KCACHE_BUSY, submitted->message) : KCACHE_OK;
  });
}

kcache_status kcache_job_wait(kcache_client* client, const char* job_id, int32_t timeout_ms,
                              kcache_buffer* job_json) {
  if (client == nullptr || job_id == nullptr || job_json == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_job_wait: NULL argument");
  }
  *job_json = kcache_buffer{nullptr, 0};
  return guarded([&] {
    auto job = client->impl->job(job_id, std::chrono::milliseconds(std::max(0, timeout_ms)));
    if (!job) {
      return to_status(job.error());
    }
    if (!fill(job_json, job->json)) {
      return fail(KCACHE_ERR_PROTOCOL, "out of memory");
    }
    return job->finished() ? KCACHE_OK : KCACHE_PENDING;
  });
}

kcache_status kcache_get_or_compile(kcache_client* client, const char* key, const char* spec_json,
                                    int32_t flags, int32_t timeout_ms, kcache_buffer* binary,
                                    kcache_buffer* info) {
  if (client == nullptr || key == nullptr || spec_json == nullptr || binary == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_get_or_compile: NULL argument");
  }
  *binary = kcache_buffer{nullptr, 0};
  if (info != nullptr) {
    *info = kcache_buffer{nullptr, 0};
  }
  return guarded([&] {
    using Kind = kcache::client::CompileOutcome::Kind;
    kcache::client::CompileRequest request;
    request.key = key;
    request.spec_json = spec_json;
    request.policy = (flags & KCACHE_COMPILE_ASYNC) != 0 ? kcache::client::WaitPolicy::kAsync
                                                         : kcache::client::WaitPolicy::kWait;
    request.wait_timeout = std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 300'000);
    auto outcome = client->impl->get_or_compile(request);
    if (!outcome) {
      return to_status(outcome.error());
    }
    nlohmann::json doc{{"outcome", outcome->kind == Kind::kHit        ? "hit"
                                   : outcome->kind == Kind::kCompiled ? "compiled"
                                   : outcome->kind == Kind::kPending  ? "pending"
                                                                      : "failed"}};
    if (outcome->artifact) {
      doc["record"] = kcache::protocol::parse_json_or_discarded(outcome->artifact->record_json);
    }
    if (outcome->job) {
      doc["job"] = kcache::protocol::parse_json_or_discarded(outcome->job->json);
    }
    if (info != nullptr && !fill(info, doc.dump())) {
      return fail(KCACHE_ERR_PROTOCOL, "out of memory");
    }
    switch (outcome->kind) {
    case Kind::kHit:
    case Kind::kCompiled:
      if (outcome->artifact->files.empty()) {
        return fail(KCACHE_ERR_PROTOCOL, "the artifact has no files");
      }
      return fill(binary, outcome->artifact->files.front().data)
                 ? KCACHE_OK
                 : fail(KCACHE_ERR_PROTOCOL, "out of memory");
    case Kind::kPending:
      return fail(KCACHE_PENDING, "the compile job has not finished");
    case Kind::kFailed:
      return fail(KCACHE_COMPILE_FAILED,
                  outcome->job ? outcome->job->error_message : "the compile failed");
    }
    return KCACHE_ERR_PROTOCOL;
  });
}

kcache_status kcache_lease_acquire(kcache_client* client, const char* key, int32_t ttl_ms,
                                   const char* holder, kcache_buffer* token, kcache_buffer* info) {
  if (client == nullptr || key == nullptr || token == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_lease_acquire: NULL argument");
  }
  *token = kcache_buffer{nullptr, 0};
  if (info != nullptr) {
    *info = kcache_buffer{nullptr, 0};
  }
  return guarded([&] {
    auto lease = client->impl->acquire_lease(
        key, std::chrono::milliseconds(ttl_ms > 0 ? ttl_ms : 30'000), holder ? holder : "");
    if (!lease) {
      return to_status(lease.error());
    }
    const nlohmann::json doc{{"granted", lease->granted},
                             {"cached", lease->cached},
                             {"holder", lease->holder},
                             {"expires_in_ms", lease->expires_in.count()}};
    if (info != nullptr && !fill(info, doc.dump())) {
      return fail(KCACHE_ERR_PROTOCOL, "out of memory");
    }
    if (!lease->granted) {
      return KCACHE_MISS;
    }
    // NUL-terminated, so C callers can pass it straight back.
    return fill(token, lease->token + std::string(1, '\0'))
               ? KCACHE_OK
               : fail(KCACHE_ERR_PROTOCOL, "out of memory");
  });
}

kcache_status kcache_lease_renew(kcache_client* client, const char* key, const char* token,
                                 int32_t ttl_ms) {
  if (client == nullptr || key == nullptr || token == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_lease_renew: NULL argument");
  }
  return guarded([&] {
    auto renewed = client->impl->renew_lease(
        key, token, std::chrono::milliseconds(ttl_ms > 0 ? ttl_ms : 30'000));
    if (!renewed) {
      return to_status(renewed.error());
    }
    return *renewed ? KCACHE_OK : fail(KCACHE_ERR_REJECTED, "the lease is no longer held");
  });
}

kcache_status kcache_lease_release(kcache_client* client, const char* key, const char* token) {
  if (client == nullptr || key == nullptr || token == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_lease_release: NULL argument");
  }
  return guarded([&] {
    auto released = client->impl->release_lease(key, token);
    return released ? KCACHE_OK : to_status(released.error());
  });
}

kcache_status kcache_get_wait(kcache_client* client, const char* key, int32_t wait_ms,
                              kcache_buffer* value) {
  if (value == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_get: NULL argument");
  }
  return kcache_get_record(client, key, wait_ms, value, nullptr);
}

kcache_status kcache_get_record(kcache_client* client, const char* key, int32_t wait_ms,
                                kcache_buffer* value, kcache_buffer* record_json) {
  if (client == nullptr || key == nullptr || value == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_get: NULL argument");
  }
  *value = kcache_buffer{nullptr, 0};
  if (record_json != nullptr) {
    *record_json = kcache_buffer{nullptr, 0};
  }
  return guarded([&] {
    auto got = client->impl->get(key, std::chrono::milliseconds(std::max(0, wait_ms)));
    if (!got) {
      return to_status(got.error());
    }
    const std::string* bytes = got->has_value() ? value_file(**got) : nullptr;
    if (bytes == nullptr) {
      return KCACHE_MISS;
    }
    if (!fill(value, *bytes) ||
        (record_json != nullptr && !fill(record_json, (*got)->record_json))) {
      kcache_buffer_free(value);
      return fail(KCACHE_ERR_PROTOCOL, "out of memory");
    }
    return KCACHE_OK;
  });
}

kcache_status kcache_put_record(kcache_client* client, const char* key, const char* record_json,
                                const uint8_t* data, size_t size) {
  if (client == nullptr || key == nullptr || (data == nullptr && size > 0)) {
    return fail(KCACHE_ERR_INVALID, "kcache_put_record: NULL argument");
  }
  return guarded([&] {
    kcache::client::PutOptions options;
    if (record_json != nullptr) {
      auto parsed = put_options_from_json(record_json);
      if (!parsed) {
        return fail(KCACHE_ERR_INVALID, "kcache_put_record: " + parsed.error());
      }
      options = std::move(*parsed);
    }
    std::string bytes(reinterpret_cast<const char*>(data), size);
    auto ok = client->impl->put(key, {{"value", std::move(bytes)}}, options);
    return ok ? KCACHE_OK : to_status(ok.error());
  });
}

kcache_status kcache_pack_headers(const char* spec_json, const char* const* include_dirs,
                                  size_t n_dirs, kcache_buffer* out_json) {
  if (spec_json == nullptr || out_json == nullptr || (n_dirs > 0 && include_dirs == nullptr)) {
    return fail(KCACHE_ERR_INVALID, "kcache_pack_headers: NULL argument");
  }
  *out_json = kcache_buffer{nullptr, 0};
  return guarded([&] {
    kcache::client::PackOptions options;
    for (size_t i = 0; i < n_dirs; ++i) {
      if (include_dirs[i] == nullptr) {
        return fail(KCACHE_ERR_INVALID, "kcache_pack_headers: NULL include dir");
      }
      options.include_dirs.emplace_back(include_dirs[i]);
    }
    auto packed = kcache::client::pack_headers(spec_json, options);
    if (!packed) {
      return to_status(packed.error());
    }
    return fill(out_json, *packed) ? KCACHE_OK : fail(KCACHE_ERR_PROTOCOL, "out of memory");
  });
}

kcache_status kcache_run_report_put(kcache_client* client, const char* ns, const char* run,
                                    const char* rank, const char* report_json) {
  if (client == nullptr || ns == nullptr || run == nullptr || rank == nullptr ||
      report_json == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_run_report_put: NULL argument");
  }
  return guarded([&] {
    auto stored = client->impl->put_run_report(ns, run, rank, report_json);
    return stored ? KCACHE_OK : to_status(stored.error());
  });
}

kcache_status kcache_runs(kcache_client* client, const char* ns, int32_t limit,
                          kcache_buffer* json) {
  if (client == nullptr || json == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_runs: NULL argument");
  }
  *json = kcache_buffer{nullptr, 0};
  return guarded([&] {
    auto runs = client->impl->runs(ns == nullptr ? "" : ns,
                                   static_cast<std::size_t>(std::max<int32_t>(limit, 1)));
    if (!runs) {
      return to_status(runs.error());
    }
    return fill(json, *runs) ? KCACHE_OK : fail(KCACHE_ERR_PROTOCOL, "out of memory");
  });
}

kcache_status kcache_run(kcache_client* client, const char* ns, const char* run,
                         kcache_buffer* json) {
  if (client == nullptr || ns == nullptr || run == nullptr || json == nullptr) {
    return fail(KCACHE_ERR_INVALID, "kcache_run: NULL argument");
  }
  *json = kcache_buffer{nullptr, 0};
  return guarded([&] {
    auto report = client->impl->run(ns, run);
    if (!report) {
      return to_status(report.error());
    }
    return fill(json, *report) ? KCACHE_OK : fail(KCACHE_ERR_PROTOCOL, "out of memory");
  });
}

void kcache_buffer_free(kcache_buffer* buffer) {
  if (buffer != nullptr) {
    // Pairs with fill()'s malloc: the C ABI hands out plain C memory.
    std::free(buffer->data); // NOLINT(cppcoreguidelines-no-malloc,cppcoreguidelines-owning-memory)
    buffer->data = nullptr;
    buffer->size = 0;
  }
}

} // extern "C"
