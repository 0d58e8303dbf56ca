// RedisJobQueue's worker side: taking entries (XREADGROUP), claiming their
// jobs (a fencing token per claim), renewing claims, reclaiming the entries of
// stalled or dead nodes (XAUTOCLAIM) and writing a job's final state.

#include "job_queue_redis_scripts.h"

#include <kcache/protocol/clock.h>
#include <kcache/service/job_queue_redis.h>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace kcache::service {

using storage::RedisReply;
using storage::Result;

namespace {

constexpr const char* kGroup = "kcache";

bool starts_with(const std::string& text, std::string_view prefix) {
  return text.rfind(prefix, 0) == 0;
}

} // namespace

Result<void> RedisJobQueue::ensure_group(const std::string& name) {
  {
    std::lock_guard lock(mu_);
    if (groups_.contains(name)) {
      return {};
    }
  }
  // From "0": entries added before the group existed are delivered too.
  auto created = redis_.run(name, {"XGROUP", "CREATE", name, kGroup, "0", "MKSTREAM"});
  if (!created) {
    return tl::unexpected(created.error());
  }
  if (created->is_error() && !starts_with(created->str, "BUSYGROUP")) {
    return redis_queue::reply_error(*created, "XGROUP CREATE");
  }
  std::lock_guard lock(mu_);
  groups_.insert(name);
  return {};
}

std::size_t RedisJobQueue::add_entries(const std::string& name, const RedisReply& entries,
                                       const std::set<std::string>& skip) {
  std::lock_guard lock(mu_);
  std::size_t added = 0;
  for (const RedisReply& e : entries.elements) {
    if (e.elements.size() < 2 || e.elements[1].type != RedisReply::Type::kArray) {
      continue; // deleted meanwhile
    }
    const std::string& id = e.elements[0].str;
    if (skip.contains(id) || std::any_of(backlog_.begin(), backlog_.end(),
                                         [&](const Entry& b) { return b.entry == id; })) {
      continue;
    }
    const auto& fields = e.elements[1].elements;
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
      if (fields[i].str == "job") {
        backlog_.push_back(Entry{name, id, fields[i + 1].str});
        ++added;
      }
    }
  }
  return added;
}

Result<std::optional<RedisJobQueue::Claim>> RedisJobQueue::claim_backlog() {
  // Each waiting entry is tried once per call. One whose job hash's master
  // does not answer goes to the back, tried again next time, instead of
  // holding up the entries behind it (on Redis Cluster their jobs live on
  // other masters); it stays pending in this node's group meanwhile.
  std::size_t tries = 0;
  {
    std::lock_guard lock(mu_);
    tries = backlog_.size();
  }
  for (; tries > 0; --tries) {
    Entry e;
    {
      std::lock_guard lock(mu_);
      if (backlog_.empty()) {
        break;
      }
      e = std::move(backlog_.front());
      backlog_.pop_front();
    }
    auto job = job_from_json(e.job_json);
    if (!job) {
      spdlog::warn("cluster queue: entry {} of {} is no job ({}); dropped", e.entry, e.stream,
                   job.error());
      ack(e.stream, e.entry);
      continue;
    }
    auto claimed =
        redis_.eval(redis_queue::kClaimScript, {job_key(job->id)},
                    {options_.node_id, std::to_string(options_.visibility_timeout.count())});
    if (!claimed || claimed->is_error() || claimed->elements.size() != 2) {
      spdlog::debug("cluster queue: job {} not claimed now ({})", job->id,
                    !claimed ? claimed.error().message : claimed->str);
      std::lock_guard lock(mu_);
      backlog_.push_back(std::move(e));
      continue;
    }
    const std::int64_t token = claimed->elements[0].integer;
    if (token < 0) {
      continue; // another node runs it and renews its claim: its entry, not ours
    }
    if (token == 0) {
      ack(e.stream, e.entry); // finished (or cancelled) while it waited
      continue;
    }
    job->state = JobState::kRunning;
    job->attempts = static_cast<std::uint32_t>(claimed->elements[1].integer);
    job->started_ms = protocol::unix_now_ms();
    return std::optional<Claim>(Claim{e.stream, e.entry, std::move(*job), token});
  }
  return std::optional<Claim>();
}

Result<std::optional<RedisJobQueue::Claim>> RedisJobQueue::take(std::chrono::milliseconds block) {
  // A master that failed once in this round is not waited on again in it.
  const storage::RedisCallScope round;
  if (auto c = claim_backlog(); !c || *c) {
    return c;
  }
  const std::set<std::string> none;
  // Bands highest first across every capability: a high-priority job of one
  // capability goes before a normal one of another. On Redis Cluster the
  // streams live on several masters: one that does not answer costs its own
  // streams only, not the jobs waiting on the others.
  std::optional<storage::StoreError> unread;
  std::size_t read_ok = 0;
  for (int priority : {1, 0, -1}) {
    for (const std::string& capability : options_.capabilities) {
      const std::string name = stream(capability, priority);
      if (auto ok = ensure_group(name); !ok) {
        unread = ok.error();
        continue;
      }
      auto read = redis_.run(name, {"XREADGROUP", "GROUP", kGroup, options_.node_id, "COUNT", "1",
                                    "STREAMS", name, ">"});
      if (!read) {
        unread = read.error();
        continue;
      }
      if (read->is_error()) {
        std::lock_guard lock(mu_);
        groups_.erase(name); // NOGROUP: Redis came back empty; made again next time
        unread = redis_queue::reply_error(*read, "XREADGROUP").value();
        continue;
      }
      ++read_ok;
      for (const RedisReply& s : read->elements) {
        if (s.elements.size() == 2) {
          add_entries(name, s.elements[1], none);
        }
      }
      if (auto c = claim_backlog(); !c || *c) {
        return c;
      }
    }
  }
  if (options_.capabilities.empty()) {
    return std::optional<Claim>();
  }
  if (read_ok == 0 && unread) {
    return tl::unexpected(std::move(*unread)); // no stream answered: the caller backs off
  }
  // Nothing waiting: block until an entry comes. On a standalone Redis one
  // XREADGROUP blocks on every stream this node serves; on Redis Cluster a
  // command stays within one slot (one capability's bands), so the block is
  // shared out among the capabilities in turn.
  std::vector<std::string> names;
  if (!options_.redis_cluster && !cross_slot_.load()) {
    for (int priority : {1, 0, -1}) {
      for (const std::string& capability : options_.capabilities) {
        names.push_back(stream(capability, priority));
      }
    }
  } else {
    names = streams(options_.capabilities[turn_++ % options_.capabilities.size()]);
    block = std::max(std::chrono::milliseconds(50),
                     block / static_cast<std::int64_t>(options_.capabilities.size()));
  }
  storage::RedisCommand command{"XREADGROUP", "GROUP", kGroup,  options_.node_id,
                                "COUNT",      "1",     "BLOCK", std::to_string(block.count()),
                                "STREAMS"};
  command.insert(command.end(), names.begin(), names.end());
  command.insert(command.end(), names.size(), ">");
  auto read = redis_.run_blocking(names.front(), std::move(command), block);
  if (!read) {
    if (read_ok > 0) {
      // This capability's master is out, not Redis: the next turn blocks on another.
      return std::optional<Claim>();
    }
    return tl::unexpected(read.error());
  }
  if (read->is_error()) {
    if (starts_with(read->str, "CROSSSLOT") || starts_with(read->str, "MOVED")) {
      cross_slot_ = true; // a Redis Cluster after all: one slot per command from now on
    }
    std::lock_guard lock(mu_);
    groups_.clear();
    return redis_queue::reply_error(*read, "XREADGROUP");
  }
  for (const RedisReply& s : read->elements) {
    if (s.elements.size() == 2) {
      add_entries(s.elements[0].str, s.elements[1], none);
    }
  }
  return claim_backlog();
}

Result<std::size_t> RedisJobQueue::reclaim(const std::set<std::string>& running) {
  // Counted as added, not as the backlog's growth: the taking thread may have
  // claimed a reclaimed entry already (on Redis Cluster it wakes every few
  // tens of ms), which made a reclaim read as 0.
  std::size_t added = 0;
  // As take(): a master that does not answer costs its own streams only,
  // and one timeout per round.
  const storage::RedisCallScope round;
  std::optional<storage::StoreError> unread;
  std::size_t read_ok = 0;
  for (const std::string& capability : options_.capabilities) {
    for (const std::string& name : streams(capability)) {
      if (auto ok = ensure_group(name); !ok) {
        unread = ok.error();
        continue;
      }
      auto claimed = redis_.run(name, {"XAUTOCLAIM", name, kGroup, options_.node_id,
                                       std::to_string(options_.visibility_timeout.count()), "0-0",
                                       "COUNT", "16"});
      if (!claimed) {
        unread = claimed.error();
        continue;
      }
      ++read_ok;
      if (claimed->is_error()) {
        std::lock_guard lock(mu_);
        groups_.erase(name);
        continue;
      }
      if (claimed->elements.size() >= 2) {
        added += add_entries(name, claimed->elements[1], running);
      }
    }
  }
  if (read_ok == 0 && unread) {
    return tl::unexpected(std::move(*unread));
  }
  return added;
}

RedisJobQueue::Renewal RedisJobQueue::renew(const Claim& claim) {
  auto renewed = redis_.eval(redis_queue::kRenewScript, {job_key(claim.job.id)},
                             {std::to_string(claim.token)});
  if (!renewed || renewed->is_error()) {
    return Renewal::kHeld;
  }
  if (renewed->integer < 0) {
    return Renewal::kLost;
  }
  // Resets the entry's idle time, so no node's XAUTOCLAIM takes it.
  (void)redis_.run(claim.stream,
                   {"XCLAIM", claim.stream, kGroup, options_.node_id, "0", claim.entry, "JUSTID"});
  return renewed->integer == 1 ? Renewal::kCancelled : Renewal::kHeld;
}

Result<std::vector<std::string>> RedisJobQueue::keys(const std::string& id) {
  const std::string set = keys_key(id);
  auto members = redis_.run(set, {"SMEMBERS", set});
  if (!members) {
    return tl::unexpected(members.error());
  }
  std::vector<std::string> out;
  for (const RedisReply& m : members->elements) {
    out.push_back(m.str);
  }
  return out;
}

Result<std::optional<std::vector<std::string>>> RedisJobQueue::seal(const Claim& claim) {
  auto sealed =
      redis_.eval(redis_queue::kSealScript, {job_key(claim.job.id), keys_key(claim.job.id)},
                  {std::to_string(claim.token)});
  if (!sealed) {
    return tl::unexpected(sealed.error());
  }
  if (sealed->is_error()) {
    return redis_queue::reply_error(*sealed, "seal");
  }
  if (sealed->is_nil()) {
    return std::optional<std::vector<std::string>>();
  }
  std::vector<std::string> out;
  for (const RedisReply& m : sealed->elements) {
    out.push_back(m.str);
  }
  return std::optional<std::vector<std::string>>(std::move(out));
}

Result<bool> RedisJobQueue::progress(const Claim& claim, std::size_t done, std::size_t total) {
  auto written =
      redis_.eval(redis_queue::kProgressScript, {job_key(claim.job.id)},
                  {std::to_string(claim.token), std::to_string(done), std::to_string(total)});
  if (!written) {
    return tl::unexpected(written.error());
  }
  if (written->is_error()) {
    return redis_queue::reply_error(*written, "progress");
  }
  return written->integer == 1;
}

Result<bool> RedisJobQueue::finish(const Claim& claim, const Job& job) {
  auto written =
      redis_.eval(redis_queue::kFinishScript, {job_key(job.id)},
                  {std::to_string(claim.token), std::string(job_state_name(job.state)),
                   redis_queue::hash_json(job), std::to_string(options_.job_ttl.count())});
  if (!written) {
    return tl::unexpected(written.error());
  }
  if (written->is_error()) {
    return redis_queue::reply_error(*written, "finish");
  }
  if (written->integer != 1) {
    return false;
  }
  (void)release_single_flight(job.compile_key, job.id);
  uncount(job);
  if (job.state == JobState::kFailed && is_cacheable_failure(job.error_code) &&
      options_.negative_ttl.count() > 0) {
    const std::string neg = redis_.key("neg:{" + job.compile_key + "}");
    (void)redis_.run(neg,
                     {"SET", neg, job.id, "PX", std::to_string(options_.negative_ttl.count())});
  }
  ack(claim.stream, claim.entry);
  (void)redis_.publish(events_channel(),
                       "job " + job.id + " " + std::string(job_state_name(job.state)));
  return true;
}

void RedisJobQueue::ack(const std::string& name, const std::string& entry) {
  // Deleted too: a stream's length is then the jobs waiting or running.
  auto done = redis_.pipeline(name, {{"XACK", name, kGroup, entry}, {"XDEL", name, entry}});
  if (!done) {
    spdlog::warn("cluster queue: ack of {} in {}: {}", entry, name, done.error().message);
  }
}

} // namespace kcache::service
