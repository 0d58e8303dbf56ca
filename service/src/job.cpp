#include <kcache/protocol/json_text.h>
#include <kcache/service/job.h>

#include <nlohmann/json.hpp>
#include <openssl/rand.h>

#include <array>
#include <cstdio>

namespace kcache::service {

nlohmann::json job_json(const Job& job, bool with_spec) {
  nlohmann::json out = protocol::to_json(job, with_spec);
  if (with_spec && !job.spec_digest.empty()) {
    out["spec_digest"] = job.spec_digest;
  }
  if (with_spec && !job.submitter.empty()) {
    out["submitter"] = job.submitter;
  }
  return out;
}

std::string job_to_json(const Job& job, bool with_spec) {
  return protocol::json_text(job_json(job, with_spec));
}

tl::expected<Job, std::string> job_from_json(std::string_view text) {
  const nlohmann::json doc = protocol::parse_json_or_discarded(text);
  auto view = protocol::job_from_json(doc);
  if (!view) {
    return tl::unexpected(view.error());
  }
  Job job;
  static_cast<protocol::JobView&>(job) = std::move(*view);
  if (const auto digest = doc.find("spec_digest"); digest != doc.end() && digest->is_string()) {
    job.spec_digest = digest->get<std::string>();
  }
  if (const auto who = doc.find("submitter"); who != doc.end() && who->is_string()) {
    job.submitter = who->get<std::string>();
  }
  return job;
}

std::string new_job_id() {
  std::array<unsigned char, 8> bytes{};
  RAND_bytes(bytes.data(), static_cast<int>(bytes.size()));
  std::string id = "j-";
  for (unsigned char b : bytes) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", b);
    id += hex;
  }
  return id;
}

} // namespace kcache::service
