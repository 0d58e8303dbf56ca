#include <kcache/protocol/json_text.h>
#include <kcache/service/job_publisher.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

namespace kcache::service {

namespace {

std::string file_name_for(compiler::OutputKind kind) {
  switch (kind) {
  case compiler::OutputKind::kCubin:
    return "kernel.cubin";
  case compiler::OutputKind::kPtx:
    return "kernel.ptx";
  case compiler::OutputKind::kObject:
    return "kernel.o";
  case compiler::OutputKind::kSharedObject:
    return "kernel.so";
  }
  return "kernel.bin";
}

std::string hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

} // namespace

JobPublisher::JobPublisher(storage::Store& store, const storage::RecordSigner* signer)
    : artifacts_(store, signer), producer_("kcache-worker@" + hostname()) {}

std::optional<cachekey::KeyManifest> JobPublisher::manifest_of(const std::string& key,
                                                               const std::string& manifest_json) {
  if (manifest_json.empty()) {
    return std::nullopt;
  }
  auto manifest = cachekey::manifest_from_json(manifest_json);
  if (!manifest || manifest->key() != key) {
    spdlog::warn("the manifest a job carries for {} {}; stored without it", key,
                 manifest ? "hashes to another key"
                          : "does not parse: " + manifest.error().message);
    return std::nullopt;
  }
  return std::move(*manifest);
}

std::optional<std::string> JobPublisher::cached(const std::string& key,
                                                const std::string& compile_key,
                                                const std::string& manifest_json) {
  if (has(key)) {
    return "already in the cache";
  }
  if (key == compile_key) {
    return std::nullopt;
  }
  // The same compile, asked for under another client key: link, do not rebuild.
  auto artifact = artifacts_.get(compile_key);
  if (!artifact || !*artifact) {
    return std::nullopt;
  }
  storage::ActionRecord copy = (*artifact)->record;
  copy.key = key;
  copy.manifest = manifest_of(key, manifest_json);
  if (auto stored = artifacts_.put(std::move(copy), std::move((*artifact)->files)); !stored) {
    return std::nullopt;
  }
  announce(key);
  return "compiled before under another key";
}

bool JobPublisher::has(const std::string& key) {
  auto record = artifacts_.get_record(key);
  return record && *record;
}

std::optional<std::string> JobPublisher::first_file(const std::string& key) {
  auto artifact = artifacts_.get(key);
  if (artifact && *artifact && !(*artifact)->files.empty()) {
    return (*artifact)->files.front().data.str();
  }
  return std::nullopt;
}

tl::expected<void, std::string>
JobPublisher::publish_compile(const compiler::CompileResult& result, const CompileMetadata& meta,
                              const std::function<std::vector<std::string>()>& keys,
                              const std::map<std::string, std::string>& manifests) {
  std::vector<storage::ArtifactFile> files = {{file_name_for(result.kind), result.binary}};
  if (!result.log.empty()) {
    files.push_back({"compile.log", result.log});
  }
  const std::map<std::string, std::string> metadata = {
      {"job", meta.job_id},
      {"compile_key", meta.compile_key},
      {"backend", meta.backend},
      {"target", meta.target},
      {"output", meta.output},
      {"compile_ms", std::to_string(result.duration.count() / 1000)},
      {"lowered_names", protocol::json_text(nlohmann::json(result.lowered_names))},
      {"toolchain", protocol::json_text(nlohmann::json(meta.toolchain))}};
  std::vector<std::string> published;
  while (true) {
    std::vector<std::string> pending;
    for (const std::string& key : keys()) {
      if (std::find(published.begin(), published.end(), key) == published.end()) {
        pending.push_back(key);
      }
    }
    if (pending.empty()) {
      return {};
    }
    for (const std::string& key : pending) {
      const auto text = manifests.find(key);
      const auto manifest = text == manifests.end() ? std::nullopt : manifest_of(key, text->second);
      auto stored = manifest ? artifacts_.put(*manifest, files, producer_, metadata, meta.submitter)
                             : artifacts_.put(key, files, producer_, metadata, meta.submitter);
      published.push_back(key);
      if (!stored) {
        spdlog::error("job {}: storing the result under {} failed: {}", meta.job_id, key,
                      stored.error().message);
        return tl::unexpected(stored.error().message);
      }
      announce(key);
    }
  }
}

tl::expected<void, std::string>
JobPublisher::publish_winner(const std::vector<std::string>& keys, const std::string& file_name,
                             const std::string& binary, const std::string& table_json,
                             const std::map<std::string, std::string>& metadata,
                             const std::string& writer) {
  for (const std::string& key : keys) {
    auto stored = artifacts_.put(key, {{file_name, binary}, {"autotune.json", table_json}},
                                 "kcache-autotune", metadata, writer);
    if (!stored) {
      return tl::unexpected(stored.error().message);
    }
    announce(key);
  }
  return {};
}

void JobPublisher::on_stored(std::function<void(const std::string& key)> listener) {
  std::lock_guard lock(listener_mu_);
  listener_ = std::move(listener);
}

void JobPublisher::announce(const std::string& key) {
  std::function<void(const std::string&)> listener;
  {
    std::lock_guard lock(listener_mu_);
    listener = listener_;
  }
  if (listener) {
    listener(key);
  }
}

} // namespace kcache::service
