// RedisJobQueue's submission side: single-flight, the negative cache,
// joining, finding, cancelling and listing jobs (the take/renew/finish side is
// job_queue_redis_take.cpp).

#include "job_queue_redis_scripts.h"

#include <kcache/protocol/clock.h>
#include <kcache/service/job_capability.h>
#include <kcache/service/job_queue_redis.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

namespace kcache::service {

using storage::RedisReply;
using storage::Result;

namespace redis_queue {

tl::unexpected<storage::StoreError> reply_error(const RedisReply& reply, std::string_view what) {
  return tl::unexpected(storage::StoreError{storage::StoreError::Code::kIo,
                                            std::string(what) + ": " + reply.str, false});
}

std::int64_t to_int(std::string_view text) {
  std::int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

std::string hash_json(const Job& job) {
  Job copy = job;
  copy.spec_json.clear(); // the spec travels in the stream entry only
  return job_to_json(copy, /*with_spec=*/true);
}

} // namespace redis_queue

using redis_queue::reply_error;
using redis_queue::to_int;

RedisJobQueue::RedisJobQueue(storage::RedisClient& redis, ClusterQueueOptions options)
    : redis_(redis), options_(std::move(options)) {}

std::string RedisJobQueue::stream(const std::string& capability, int priority) const {
  const char* band = priority > 0 ? "high" : priority < 0 ? "low" : "normal";
  return redis_.key("q:{" + capability + "}:" + band);
}

std::vector<std::string> RedisJobQueue::streams(const std::string& capability) const {
  return {stream(capability, 1), stream(capability, 0), stream(capability, -1)};
}

std::string RedisJobQueue::advert_key(const std::string& capability) const {
  return redis_.key("cap:{" + capability + "}");
}

std::string RedisJobQueue::job_key(const std::string& id) const {
  return redis_.key("job:{" + id + "}");
}

std::string RedisJobQueue::keys_key(const std::string& id) const {
  return redis_.key("job:{" + id + "}:keys");
}

Result<SubmitResult> RedisJobQueue::submit(const Job& job, const std::string& key,
                                           const Admit& admit) {
  const std::string neg = redis_.key("neg:{" + job.compile_key + "}");
  auto failed_id = redis_.run(neg, {"GET", neg});
  if (!failed_id) {
    return tl::unexpected(failed_id.error());
  }
  if (failed_id->type == RedisReply::Type::kString) {
    auto failed = find(failed_id->str);
    if (!failed) {
      return tl::unexpected(failed.error());
    }
    // Every byte of the spec, as the local negative cache compares.
    if (*failed && (*failed)->spec_digest == job.spec_digest && (*failed)->finished()) {
      return SubmitResult{SubmitStatus::kFailedRecently, **failed,
                          "this compile failed recently: " + (*failed)->error_message};
    }
  }
  // The job's hash first, then the claim on its compile key: whoever finds
  // the single-flight key finds the job it names (no "gone" for a fresh one).
  const std::string ttl = std::to_string(options_.job_ttl.count());
  Job stored = job;
  if (key != job.compile_key && !key.empty()) {
    stored.keys.push_back(key);
  }
  const std::string hash = job_key(job.id);
  const std::string keys = keys_key(job.id);
  // What it waits for, kept so that any node can say so while it is queued
  // (find): the native target class is the submitting node's.
  const std::string capability = job_capability(job, options_.cpu_arch);
  const std::string wanted = capability_wanted(job, options_.cpu_arch);
  storage::RedisCommand sadd{"SADD", keys};
  sadd.insert(sadd.end(), stored.keys.begin(), stored.keys.end());
  auto written = redis_.pipeline(
      hash, {{"HSET", hash, "state", "queued", "job", redis_queue::hash_json(stored), "token", "0",
              "attempts", "0", "submissions", "1", "capability", capability, "wanted", wanted},
             {"PEXPIRE", hash, ttl},
             std::move(sadd),
             {"PEXPIRE", keys, ttl}});
  if (!written) {
    return tl::unexpected(written.error());
  }
  for (const RedisReply& reply : *written) {
    if (reply.is_error()) { // LOADING, OOM...: no hash, so no entry may name it
      (void)redis_.pipeline(hash, {{"DEL", hash, keys}});
      return reply_error(reply, "HSET");
    }
  }
  auto not_ours = [&](Result<SubmitResult> result) {
    (void)redis_.pipeline(hash, {{"DEL", hash, keys}});
    return result;
  };
  const std::string sf = redis_.key("sf:{" + job.compile_key + "}");
  bool owner = false;
  for (int attempt = 0; attempt < 3 && !owner; ++attempt) {
    auto set = redis_.run(sf, {"SET", sf, job.id, "NX", "PX", ttl});
    if (!set) {
      return not_ours(tl::unexpected(set.error()));
    }
    if (set->type == RedisReply::Type::kStatus) {
      owner = true;
      break;
    }
    auto current = redis_.run(sf, {"GET", sf});
    if (!current) {
      return not_ours(tl::unexpected(current.error()));
    }
    if (current->type != RedisReply::Type::kString) {
      continue; // released meanwhile
    }
    auto joined = join(current->str, job, key);
    if (!joined || joined->status != SubmitStatus::kInvalid) {
      return not_ours(std::move(joined));
    }
    // A stale owner (failed, cancelled or expired): let it go and try again.
    if (auto ok = release_single_flight(job.compile_key, current->str); !ok) {
      return not_ours(tl::unexpected(ok.error()));
    }
  }
  if (!owner) {
    return not_ours(tl::unexpected(storage::StoreError{
        storage::StoreError::Code::kIo, "single-flight key keeps changing owner", false}));
  }
  if (auto instead = admit ? admit() : std::nullopt) {
    (void)release_single_flight(job.compile_key, job.id);
    return not_ours(std::move(*instead));
  }
  auto refused = over_quota(job);
  if (!refused) {
    (void)release_single_flight(job.compile_key, job.id);
    return not_ours(tl::unexpected(refused.error()));
  }
  if (*refused) {
    (void)release_single_flight(job.compile_key, job.id);
    return not_ours(std::move(**refused));
  }
  const std::string entry_stream = stream(capability, job.priority);
  auto added =
      redis_.run(entry_stream, {"XADD", entry_stream, "*", "job", job_to_json(stored, true)});
  if (!added || added->is_error()) {
    (void)release_single_flight(job.compile_key, job.id); // best effort: it never queued
    return not_ours(!added ? tl::unexpected(added.error()) : reply_error(*added, "XADD"));
  }
  const std::string index = redis_.key("jobs");
  const std::int64_t now = protocol::unix_now_ms();
  (void)redis_.pipeline(
      index, {{"ZADD", index, std::to_string(stored.submitted_ms), stored.id},
              {"ZREMRANGEBYSCORE", index, "-inf", std::to_string(now - options_.job_ttl.count())}});
  if (options_.max_jobs_per_submitter > 0 && !job.submitter.empty()) {
    // Not counted if this fails: the quota errs towards letting work run.
    const std::string mine = submitter_key(job.submitter);
    (void)redis_.pipeline(mine,
                          {{"ZADD", mine, std::to_string(now), job.id}, {"PEXPIRE", mine, ttl}});
  }
  (void)redis_.publish(events_channel(), "job " + job.id + " queued");
  // It stays queued either way: a node of its capability may join later.
  if (auto serving = live_nodes(capability); serving && *serving == 0) {
    spdlog::info("cluster job {} queued for {}: no live node serves it yet", job.id, capability);
    stored.waiting_for = waiting_reason(wanted, capability);
    return SubmitResult{SubmitStatus::kQueued, stored,
                        "queued in the cluster; " + stored.waiting_for};
  }
  return SubmitResult{SubmitStatus::kQueued, stored, "queued in the cluster"};
}

std::string RedisJobQueue::waiting_reason(const std::string& wanted,
                                          const std::string& capability) {
  return "waiting for " + wanted + " (no live node serves " + capability + ")";
}

std::string RedisJobQueue::submitter_key(const std::string& submitter) const {
  return redis_.key("sub:{" + escape_capability_part(submitter) + "}");
}

Result<std::optional<SubmitResult>> RedisJobQueue::over_quota(const Job& job) {
  const std::size_t quota = options_.max_jobs_per_submitter;
  if (quota == 0 || job.submitter.empty()) {
    return std::optional<SubmitResult>();
  }
  const std::string mine = submitter_key(job.submitter);
  const std::string too_old =
      "(" + std::to_string(protocol::unix_now_ms() - options_.job_ttl.count());
  auto counted =
      redis_.pipeline(mine, {{"ZREMRANGEBYSCORE", mine, "-inf", too_old}, {"ZCARD", mine}});
  if (!counted) {
    return tl::unexpected(counted.error());
  }
  auto active = static_cast<std::size_t>(std::max<std::int64_t>(0, (*counted)[1].integer));
  if (active + 1 > quota) {
    // At the quota: drop ids whose job ended without uncounting itself (its
    // node died between writing the final state and the ZREM), or expired.
    auto ids = redis_.run(mine, {"ZRANGE", mine, "0", "-1"});
    if (!ids) {
      return tl::unexpected(ids.error());
    }
    active = ids->elements.size();
    for (const RedisReply& id : ids->elements) {
      const std::string hash = job_key(id.str);
      auto state = redis_.run(hash, {"HGET", hash, "state"});
      if (!state) {
        return tl::unexpected(state.error());
      }
      if (state->is_error()) {
        continue; // its master cannot say now: still counted
      }
      const auto s = state->type == RedisReply::Type::kString ? parse_job_state(state->str)
                                                              : tl::unexpected(std::string());
      if (!s || is_finished(*s)) {
        (void)redis_.run(mine, {"ZREM", mine, id.str});
        --active;
      }
    }
  }
  if (active + 1 > quota) {
    return std::optional<SubmitResult>(
        SubmitResult{SubmitStatus::kBusy, std::nullopt,
                     "this submitter has " + std::to_string(active) +
                         " jobs queued or running in the cluster; max_jobs_per_submitter is " +
                         std::to_string(quota)});
  }
  return std::optional<SubmitResult>();
}

void RedisJobQueue::uncount(const Job& job) {
  if (options_.max_jobs_per_submitter > 0 && !job.submitter.empty()) {
    const std::string mine = submitter_key(job.submitter);
    (void)redis_.run(mine, {"ZREM", mine, job.id}); // else pruned at the quota
  }
}

// kInvalid: the owner is gone or failed (the caller releases it and retries).
Result<SubmitResult> RedisJobQueue::join(const std::string& owner, const Job& job,
                                         const std::string& key) {
  auto joined = redis_.eval(redis_queue::kJoinScript, {job_key(owner), keys_key(owner)},
                            {key.empty() ? job.compile_key : key});
  if (!joined) {
    return tl::unexpected(joined.error());
  }
  if (joined->is_error()) {
    return reply_error(*joined, "join");
  }
  if (joined->str == "sealed") {
    return SubmitResult{SubmitStatus::kCached, std::nullopt, "compiled by the cluster"};
  }
  if (joined->str != "joined") {
    return SubmitResult{SubmitStatus::kInvalid, std::nullopt, joined->str};
  }
  auto found = find(owner);
  if (!found) {
    return tl::unexpected(found.error());
  }
  return SubmitResult{SubmitStatus::kJoined, std::move(*found),
                      "joined the job already working on this in the cluster"};
}

Result<void> RedisJobQueue::release_single_flight(const std::string& compile_key,
                                                  const std::string& id) {
  auto released =
      redis_.eval(redis_queue::kReleaseScript, {redis_.key("sf:{" + compile_key + "}")}, {id});
  if (!released) {
    return tl::unexpected(released.error());
  }
  return {};
}

Result<std::optional<Job>> RedisJobQueue::find(const std::string& id) {
  const std::string hash = job_key(id);
  auto replies = redis_.pipeline(hash, {{"HGETALL", hash}, {"SMEMBERS", keys_key(id)}});
  if (!replies) {
    return tl::unexpected(replies.error());
  }
  const RedisReply& fields = (*replies)[0];
  if (fields.is_error()) {
    // CLUSTERDOWN, LOADING...: Redis cannot say now, which is not "no such job".
    return reply_error(fields, "HGETALL");
  }
  std::optional<Job> job;
  std::string state, attempts, started, submissions, capability, wanted, done, total;
  for (std::size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
    const std::string& name = fields.elements[i].str;
    const std::string& value = fields.elements[i + 1].str;
    if (name == "job") {
      if (auto parsed = job_from_json(value)) {
        job = std::move(*parsed);
      }
    } else if (name == "state") {
      state = value;
    } else if (name == "attempts") {
      attempts = value;
    } else if (name == "started_ms") {
      started = value;
    } else if (name == "submissions") {
      submissions = value;
    } else if (name == "capability") {
      capability = value;
    } else if (name == "wanted") {
      wanted = value;
    } else if (name == "progress_done") {
      done = value;
    } else if (name == "progress_total") {
      total = value;
    }
  }
  if (!job) {
    return std::optional<Job>();
  }
  if (auto s = parse_job_state(state); s && !is_finished(job->state)) {
    job->state = *s; // the fields move while it runs; the JSON is its final word
    if (!attempts.empty()) {
      job->attempts = static_cast<std::uint32_t>(to_int(attempts));
    }
    if (!started.empty()) {
      job->started_ms = to_int(started);
    }
    if (!done.empty() && !total.empty()) {
      job->progress_done = static_cast<std::size_t>(to_int(done)); // a search as it runs
      job->progress_total = static_cast<std::size_t>(to_int(total));
    }
  }
  // Asked when read, not stored: a node of its capability may have come or
  // gone since it was submitted. A Redis error here leaves it unsaid.
  if (job->state == JobState::kQueued && !capability.empty()) {
    if (auto serving = live_nodes(capability); serving && *serving == 0) {
      job->waiting_for = waiting_reason(wanted, capability);
    }
  }
  if (!submissions.empty()) {
    job->submissions = static_cast<std::uint32_t>(to_int(submissions));
  }
  for (const RedisReply& k : (*replies)[1].elements) {
    if (std::find(job->keys.begin(), job->keys.end(), k.str) == job->keys.end()) {
      job->keys.push_back(k.str);
    }
  }
  return job;
}

Result<std::optional<Job>> RedisJobQueue::cancel(const std::string& id) {
  auto found = find(id);
  if (!found || !*found || (*found)->finished()) {
    return found;
  }
  Job cancelled = **found;
  cancelled.state = JobState::kCancelled;
  cancelled.error_code = JobError::kCancelled;
  cancelled.error_message = "cancelled before it ran";
  cancelled.finished_ms = protocol::unix_now_ms();
  auto done = redis_.eval(redis_queue::kCancelScript, {job_key(id)},
                          {"cancelled", redis_queue::hash_json(cancelled)});
  if (!done) {
    return tl::unexpected(done.error());
  }
  if (done->is_error()) { // CLUSTERDOWN, READONLY...: not cancelled, and not known to run
    return reply_error(*done, "EVAL cancel");
  }
  if (done->str == "cancelled") {
    (void)release_single_flight(cancelled.compile_key, id);
    uncount(cancelled);
    (void)redis_.publish(events_channel(), "job " + id + " cancelled");
    return std::optional<Job>(std::move(cancelled));
  }
  return find(id); // running: its node stops it at its next renewal
}

Result<std::vector<Job>> RedisJobQueue::list(std::optional<JobState> state, std::size_t limit) {
  const std::string index = redis_.key("jobs");
  const std::size_t scan = std::min<std::size_t>(1000, limit * 4 + 16);
  auto ids = redis_.run(index, {"ZREVRANGE", index, "0", std::to_string(scan - 1)});
  if (!ids) {
    return tl::unexpected(ids.error());
  }
  std::vector<Job> jobs;
  for (const RedisReply& id : ids->elements) {
    if (jobs.size() >= limit) {
      break;
    }
    auto job = find(id.str);
    if (!job) {
      continue; // its master cannot say now: the list shows the jobs that can be read
    }
    if (*job && (!state || (*job)->state == *state)) {
      jobs.push_back(std::move(**job));
    }
  }
  return jobs;
}

Result<std::size_t> RedisJobQueue::depth() {
  // A master that does not answer costs its own capabilities' count only.
  const storage::RedisCallScope scope;
  std::optional<storage::StoreError> unread;
  std::size_t read_ok = 0;
  std::size_t total = 0;
  for (const std::string& capability : options_.capabilities) {
    const std::vector<std::string> names = streams(capability);
    std::vector<storage::RedisCommand> lens;
    lens.reserve(names.size());
    for (const std::string& name : names) {
      lens.push_back({"XLEN", name});
    }
    auto replies = redis_.pipeline(names.front(), std::move(lens));
    if (!replies) {
      unread = replies.error();
      continue; // counted as empty: the bound errs towards letting work run
    }
    ++read_ok;
    for (const RedisReply& r : *replies) {
      total += r.type == RedisReply::Type::kInteger ? static_cast<std::size_t>(r.integer) : 0;
    }
  }
  if (read_ok == 0 && unread) {
    return tl::unexpected(std::move(*unread));
  }
  return total;
}

Result<void> RedisJobQueue::advertise() {
  const std::int64_t now = protocol::unix_now_ms();
  const std::string cutoff = "(" + std::to_string(now - options_.advertise_ttl.count());
  // Every capability whose master answers is advertised, whichever does not.
  const storage::RedisCallScope scope;
  std::optional<storage::StoreError> failed;
  for (const std::string& capability : options_.capabilities) {
    const std::string set = advert_key(capability);
    auto done =
        redis_.pipeline(set, {{"ZADD", set, std::to_string(now), options_.node_id},
                              {"ZREMRANGEBYSCORE", set, "-inf", cutoff},
                              {"PEXPIRE", set, std::to_string(options_.advertise_ttl.count())}});
    if (!done) {
      failed = done.error();
    }
  }
  if (failed) {
    return tl::unexpected(std::move(*failed));
  }
  return {};
}

Result<std::size_t> RedisJobQueue::live_nodes(const std::string& capability) {
  const std::string set = advert_key(capability);
  const std::int64_t now = protocol::unix_now_ms();
  auto count = redis_.run(
      set, {"ZCOUNT", set, "(" + std::to_string(now - options_.advertise_ttl.count()), "+inf"});
  if (!count) {
    return tl::unexpected(count.error());
  }
  return count->type == RedisReply::Type::kInteger ? static_cast<std::size_t>(count->integer) : 0;
}

std::size_t RedisJobQueue::backlog() const {
  std::lock_guard lock(mu_);
  return backlog_.size();
}

} // namespace kcache::service
