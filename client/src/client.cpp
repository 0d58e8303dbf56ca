#include "responses.h"

#include <kcache/client/client.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/wire.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <thread>

namespace kcache::client {

namespace wire = protocol::wire;
using nlohmann::json;

Result<Artifact> decode_artifact(std::string key, std::string_view parts_body) {
  auto parts = wire::decode_parts(parts_body);
  if (!parts || parts->empty() || parts->front().name != "record") {
    return tl::unexpected(ClientError{ErrorCode::kProtocol, 0,
                                      "malformed artifact body: " +
                                          (parts ? std::string("no record part") : parts.error())});
  }
  Artifact artifact{std::move(key), std::move(parts->front().data), {}};
  for (std::size_t i = 1; i < parts->size(); ++i) {
    artifact.files.push_back({std::move((*parts)[i].name), std::move((*parts)[i].data)});
  }
  return artifact;
}

Result<std::unique_ptr<Client>> Client::create(ClientOptions options) {
  auto endpoint = parse_endpoint(options.url);
  if (!endpoint) {
    return tl::unexpected(endpoint.error());
  }
  std::unique_ptr<Verifier> verifier;
  if (options.verify_signatures) {
    // Verification asked for but impossible is refused here, not turned
    // into a client that silently trusts everything.
    if (options.trusted_keys.empty()) {
      return tl::unexpected(ClientError{ErrorCode::kInvalid, 0,
                                        "verify_signatures needs trusted_keys (PEM public keys)"});
    }
    auto trusted = protocol::TrustedKeys::load(options.trusted_keys);
    if (!trusted) {
      return tl::unexpected(
          ClientError{ErrorCode::kInvalid, 0, "trusted_keys: " + trusted.error()});
    }
    if (trusted->size() == 0) {
      return tl::unexpected(
          ClientError{ErrorCode::kInvalid, 0, "trusted_keys: no public key found there"});
    }
    verifier = std::make_unique<Verifier>(std::move(*trusted));
  }
  std::shared_ptr<TlsClientContext> tls;
  if (endpoint->tls) {
    auto context = make_tls_client_context(
        {options.ca_file, options.client_cert_file, options.client_key_file});
    if (!context) {
      return tl::unexpected(context.error());
    }
    tls = std::move(*context);
  }
  auto client = std::make_unique<Client>(PrivateTag{}, std::move(options), std::move(*endpoint));
  client->verifier_ = std::move(verifier);
  client->tls_ = std::move(tls);
  return client;
}

VerificationStats Client::verification() const {
  return verifier_ ? verifier_->stats() : VerificationStats{};
}

Client::Client(PrivateTag, ClientOptions options, Endpoint endpoint)
    : options_(std::move(options)), endpoint_(std::move(endpoint)),
      pool_(options_.max_idle_connections), down_({1, options_.down_backoff}) {}

Client::~Client() = default;

Result<HttpResponse> Client::round_trip(const HttpRequest& request) {
  return round_trip(request, options_.timeout);
}

Result<HttpResponse> Client::round_trip(const HttpRequest& request,
                                        std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (!down_.allow()) {
    return tl::unexpected(ClientError{ErrorCode::kUnavailable, 0,
                                      "kcached was unreachable moments ago; backing off"});
  }
  ClientError last{ErrorCode::kUnavailable, 0, "no attempt made"};
  for (int attempt = 0; attempt <= options_.retries; ++attempt) {
    auto connection = pool_.take();
    if (!connection) {
      connection = make_connection(endpoint_, tls_);
    }
    const bool reused = connection->reused();
    auto res = connection->round_trip(request, deadline, options_.connect_timeout);
    if (res) {
      pool_.give_back(std::move(connection));
      down_.record_success();
      return res;
    }
    last = res.error();
    if (last.code == ErrorCode::kTimeout || std::chrono::steady_clock::now() >= deadline) {
      break;
    }
    if (reused) {
      continue; // a keep-alive connection the daemon closed: retry at once on a fresh one
    }
    if (attempt == options_.retries) {
      break;
    }
    std::this_thread::sleep_for(options_.retry_backoff * (1 << attempt));
  }
  // Only an unreachable daemon backs off; a slow or confused one was reached.
  if (last.code == ErrorCode::kUnavailable) {
    down_.record_failure();
  } else {
    down_.record_success();
  }
  return tl::unexpected(last);
}

Result<HttpResponse> Client::request(HttpMethod method, std::string_view target, std::string body,
                                     std::string_view content_type) {
  return round_trip(HttpRequest{method, std::string(target), std::move(body),
                                std::string(content_type), options_.token});
}

Result<std::optional<Artifact>> Client::get(std::string_view key) {
  return get(key, std::chrono::milliseconds(0));
}

Result<std::optional<Artifact>> Client::get(std::string_view key, std::chrono::milliseconds wait) {
  if (auto ok = check_key(key); !ok) {
    return tl::unexpected(ok.error());
  }
  std::string target = "/v1/artifacts/" + std::string(key);
  if (wait.count() > 0) {
    target += "?wait_ms=" + std::to_string(wait.count());
  }
  // The daemon may hold a waiting get up to `wait`: the deadline covers that too.
  auto res = round_trip(HttpRequest{HttpMethod::kGet, std::move(target), {}, {}, options_.token},
                        std::max(wait, std::chrono::milliseconds(0)) + options_.timeout);
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status == 404) {
    return std::optional<Artifact>{};
  }
  if (res->status != 200) {
    return tl::unexpected(from_status(*res));
  }
  auto artifact = decode_artifact(std::string(key), res->body);
  if (!artifact) {
    return tl::unexpected(artifact.error());
  }
  if (verifier_) {
    return verifier_->screen(std::move(*artifact));
  }
  return std::optional<Artifact>{std::move(*artifact)};
}

Result<void> Client::put(std::string_view key, const std::vector<File>& files,
                         const PutOptions& options) {
  if (auto ok = check_key(key); !ok) {
    return ok;
  }
  const auto head = protocol::to_json(options);
  if (!head) {
    return tl::unexpected(ClientError{ErrorCode::kInvalid, 0, head.error()});
  }
  std::vector<wire::Part> parts;
  parts.reserve(files.size() + 1);
  parts.push_back({"record", protocol::json_text(*head)});
  for (const File& f : files) {
    parts.push_back({f.name, f.data});
  }
  auto res = request(HttpMethod::kPut, "/v1/artifacts/" + std::string(key),
                     wire::encode_parts(parts), wire::kPartsContentType);
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status != 201) {
    return tl::unexpected(from_status(*res));
  }
  return {};
}

Result<bool> Client::exists(std::string_view key) {
  if (auto ok = check_key(key); !ok) {
    return tl::unexpected(ok.error());
  }
  auto res = request(HttpMethod::kHead, "/v1/ac/" + std::string(key));
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status == 200 || res->status == 404) {
    return res->status == 200;
  }
  return tl::unexpected(from_status(*res));
}

Result<std::string> Client::record(std::string_view key) {
  if (auto ok = check_key(key); !ok) {
    return tl::unexpected(ok.error());
  }
  auto res = request(HttpMethod::kGet, "/v1/ac/" + std::string(key));
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status != 200) {
    return tl::unexpected(from_status(*res));
  }
  return std::move(res->body);
}

Result<void> Client::remove(std::string_view key) {
  if (auto ok = check_key(key); !ok) {
    return ok;
  }
  auto res = request(HttpMethod::kDelete, "/v1/ac/" + std::string(key));
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status != 200) {
    return tl::unexpected(from_status(*res));
  }
  return {};
}

Result<std::vector<std::optional<Artifact>>> Client::batch_get(std::span<const std::string> keys) {
  for (const std::string& key : keys) {
    if (auto ok = check_key(key); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  auto res = request(HttpMethod::kPost, "/v1/batch/get", json{{"keys", keys}}.dump(),
                     wire::kJsonContentType);
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status != 200) {
    return tl::unexpected(from_status(*res));
  }
  auto parts = wire::decode_parts(res->body);
  if (!parts || parts->size() != keys.size()) {
    return tl::unexpected(ClientError{ErrorCode::kProtocol, 0, "malformed batch answer"});
  }
  std::vector<std::optional<Artifact>> out;
  out.reserve(keys.size());
  for (wire::Part& part : *parts) {
    if (part.data.empty()) {
      out.emplace_back();
      continue;
    }
    auto artifact = decode_artifact(std::move(part.name), part.data);
    if (!artifact) {
      return tl::unexpected(artifact.error());
    }
    if (verifier_) {
      out.push_back(verifier_->screen(std::move(*artifact)));
    } else {
      out.emplace_back(std::move(*artifact));
    }
  }
  return out;
}

} // namespace kcache::client
