#include <kcache/cachekey/sha256.h>
#include <kcache/compiler/spec_check.h>
#include <kcache/protocol/clock.h>
#include <kcache/protocol/enum_names.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/job_intake.h>

namespace kcache::service {

namespace {

constexpr protocol::EnumNames<SubmitStatus, 9>
    kSubmitStatuses({{{SubmitStatus::kQueued, "queued"},
                      {SubmitStatus::kJoined, "joined"},
                      {SubmitStatus::kCached, "cached"},
                      {SubmitStatus::kFailedRecently, "failed-recently"},
                      {SubmitStatus::kBusy, "busy"},
                      {SubmitStatus::kInvalid, "invalid"},
                      {SubmitStatus::kUnavailable, "unavailable"},
                      {SubmitStatus::kStoreError, "store-error"},
                      {SubmitStatus::kTooLarge, "too-large"}}});

} // namespace

std::string_view submit_status_name(SubmitStatus status) {
  return kSubmitStatuses.name(status);
}

tl::expected<compiler::CompileSpec, SubmitResult>
JobIntake::prepare(compiler::CompileSpec spec) const {
  const auto toolchain = runner_.toolchains().find(spec.backend);
  if (toolchain == runner_.toolchains().end()) {
    return tl::unexpected(SubmitResult{SubmitStatus::kUnavailable, std::nullopt,
                                       "the " + std::string(compiler::backend_name(spec.backend)) +
                                           " backend is not built into " + runner_.name()});
  }
  // "native" is this host's CPU: keyed by its name and features as the
  // worker's LLVM sees them, so no other host's build answers for it.
  if (spec.target == "native" &&
      (spec.backend == compiler::Backend::kCpp || spec.backend == compiler::Backend::kLlvmIr)) {
    const auto& host = runner_.host_target();
    if (!host) {
      return tl::unexpected(SubmitResult{SubmitStatus::kInvalid, std::nullopt,
                                         "target 'native': this kcached could not read its "
                                         "host's CPU from kcache-worker; name a CPU instead"});
    }
    spec.target = host->cpu;
    if (!host->features.empty()) {
      spec.options.push_back("-mattr=" + host->features);
    }
  }
  auto prepared = compiler::prepare_spec(spec, &toolchain->second);
  if (!prepared) {
    return tl::unexpected(SubmitResult{SubmitStatus::kInvalid, std::nullopt, prepared.error()});
  }
  return std::move(*prepared);
}

tl::expected<std::string, std::string>
JobIntake::compile_key(const compiler::CompileSpec& spec) const {
  const auto toolchain = runner_.toolchains().find(spec.backend);
  if (toolchain == runner_.toolchains().end()) {
    return tl::unexpected("the " + std::string(compiler::backend_name(spec.backend)) +
                          " backend is not built into " + runner_.name());
  }
  return "kcc-" + cachekey::to_hex(compiler::compile_key(spec, toolchain->second));
}

std::optional<SubmitResult> JobIntake::too_long(std::string_view spec_json) const {
  if (spec_json.size() <= max_text_bytes(max_spec_bytes_)) {
    return std::nullopt;
  }
  return SubmitResult{SubmitStatus::kTooLarge, std::nullopt,
                      "the spec is " + std::to_string(spec_json.size()) +
                          " bytes of JSON, more than a spec within max_spec_bytes (" +
                          std::to_string(max_spec_bytes_) + " bytes of source and headers) can be"};
}

std::optional<SubmitResult> JobIntake::too_large(const compiler::CompileSpec& spec) const {
  std::uint64_t bytes = spec.source.text.size();
  for (const compiler::SourceFile& header : spec.headers) {
    bytes += header.text.size();
  }
  if (bytes <= max_spec_bytes_) {
    return std::nullopt;
  }
  return SubmitResult{SubmitStatus::kTooLarge, std::nullopt,
                      "the spec's source and headers are " + std::to_string(bytes) +
                          " bytes, over max_spec_bytes (" + std::to_string(max_spec_bytes_) +
                          " bytes)"};
}

tl::expected<JobIntake::Compile, SubmitResult>
JobIntake::compile(const Submission& submission) const {
  if (auto refused = too_long(submission.spec_json)) {
    return tl::unexpected(std::move(*refused));
  }
  auto spec = compiler::spec_from_json(submission.spec_json);
  if (!spec) {
    return tl::unexpected(SubmitResult{SubmitStatus::kInvalid, std::nullopt, spec.error()});
  }
  if (auto refused = too_large(*spec)) {
    return tl::unexpected(std::move(*refused));
  }
  auto prepared = prepare(*spec);
  if (!prepared) {
    return tl::unexpected(std::move(prepared.error()));
  }
  auto key = compile_key(*prepared);
  if (!key) {
    return tl::unexpected(SubmitResult{SubmitStatus::kUnavailable, std::nullopt, key.error()});
  }
  std::string client_key = submission.key.empty() ? *key : submission.key;
  if (!protocol::wire::is_valid_action_key(client_key)) {
    return tl::unexpected(
        SubmitResult{SubmitStatus::kInvalid, std::nullopt, "invalid key '" + client_key + "'"});
  }
  // The job keeps the prepared spec: the worker compiles what the key names.
  Compile out{job(*prepared, *key, compiler::spec_to_json(*prepared), submission.priority),
              std::move(client_key)};
  out.job.submitter = submission.submitter;
  if (!submission.key.empty() && !submission.manifest_json.empty()) {
    out.job.manifests.emplace(submission.key, submission.manifest_json);
  }
  return out;
}

Job JobIntake::job(const compiler::CompileSpec& spec, const std::string& compile_key,
                   std::string spec_json, int priority) {
  Job job;
  job.id = new_job_id();
  job.compile_key = compile_key;
  job.keys = {compile_key};
  job.spec_json = std::move(spec_json);
  job.spec_digest = spec_digest(job.spec_json);
  job.backend = compiler::backend_name(spec.backend);
  job.target = spec.target;
  job.entry = spec.name_expressions.empty() ? spec.source.name : spec.name_expressions.front();
  job.output = compiler::output_name(spec.output);
  job.priority = priority;
  job.submitted_ms = protocol::unix_now_ms();
  return job;
}

std::string JobIntake::spec_digest(const std::string& spec_json) {
  return cachekey::to_hex(cachekey::Sha256::of(spec_json));
}

} // namespace kcache::service
