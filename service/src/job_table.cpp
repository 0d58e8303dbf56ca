#include <kcache/service/job_table.h>

#include <algorithm>

namespace kcache::service {

namespace {

// A failure is remembered under every byte of its spec, not its compile key.
std::string failure_key(const Job& job) {
  return job.compile_key + "/" + job.spec_digest;
}

} // namespace

Job* JobTable::find(const std::string& id) {
  const auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const Job* JobTable::find(const std::string& id) const {
  const auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const Job* JobTable::failed_recently(const Job& job, Clock::time_point now) {
  const auto failed = failures_.find(failure_key(job));
  if (failed == failures_.end()) {
    return nullptr;
  }
  if (failed->second.expires > now) {
    if (const Job* previous = find(failed->second.job_id)) {
      return previous;
    }
  }
  failures_.erase(failed);
  return nullptr;
}

Job* JobTable::active(const std::string& compile_key) {
  const auto it = active_by_key_.find(compile_key);
  return it == active_by_key_.end() ? nullptr : &jobs_.at(it->second);
}

bool JobTable::join(Job& existing, const std::string& key, const std::vector<std::string>& parents,
                    int priority) {
  ++existing.submissions;
  if (std::find(existing.keys.begin(), existing.keys.end(), key) == existing.keys.end()) {
    existing.keys.push_back(key);
  }
  for (const std::string& parent : parents) {
    existing.parents.push_back(parent);
  }
  if (priority <= existing.priority) {
    return false;
  }
  existing.priority = priority;
  return true;
}

Job& JobTable::add(Job job) {
  active_by_key_[job.compile_key] = job.id;
  ++active_by_submitter_[job.submitter];
  const std::string id = job.id;
  return jobs_[id] = std::move(job);
}

std::size_t JobTable::active_jobs(const std::string& submitter) const {
  const auto it = active_by_submitter_.find(submitter);
  return it == active_by_submitter_.end() ? 0 : it->second;
}

JobTable::Finished JobTable::finish(Job& job, JobState state, std::int64_t wall_ms,
                                    Clock::time_point now) {
  job.state = state;
  job.finished_ms = wall_ms;
  active_by_key_.erase(job.compile_key);
  if (const auto it = active_by_submitter_.find(job.submitter);
      it != active_by_submitter_.end() && --it->second == 0) {
    active_by_submitter_.erase(it);
  }
  job.spec_json = std::string(); // frees it: the digest stays
  if (state == JobState::kFailed && is_cacheable_failure(job.error_code) &&
      negative_ttl_.count() > 0) {
    failures_[failure_key(job)] = Failure{job.id, now + negative_ttl_};
  }
  Finished out{job, {}};
  out.evicted = remember_finished(job, wall_ms, now); // may erase `job`
  return out;
}

std::vector<std::string> JobTable::restore(Job job, std::int64_t wall_ms, Clock::time_point now) {
  if (!is_finished(job.state)) {
    add(std::move(job));
    return {};
  }
  job.spec_json = std::string(); // as finish() leaves it (older journals kept it)
  const std::string id = job.id;
  Job& stored = jobs_[id] = std::move(job);
  return remember_finished(stored, wall_ms, now);
}

std::vector<std::string> JobTable::remember_finished(const Job& job, std::int64_t wall_ms,
                                                     Clock::time_point now) {
  finished_order_.push_back(job.id);
  if (job.state == JobState::kFailed && is_cacheable_failure(job.error_code)) {
    // After a restart, a failure still inside its TTL stays remembered.
    const auto age = std::chrono::milliseconds(wall_ms - job.finished_ms);
    if (age < negative_ttl_ && !failures_.contains(failure_key(job))) {
      failures_[failure_key(job)] = Failure{job.id, now + (negative_ttl_ - age)};
    }
  }
  std::vector<std::string> evicted;
  while (finished_order_.size() > history_) {
    const std::string oldest = finished_order_.front();
    finished_order_.pop_front();
    const auto it = jobs_.find(oldest);
    if (it == jobs_.end()) {
      continue;
    }
    if (const auto f = failures_.find(failure_key(it->second));
        f != failures_.end() && f->second.job_id == oldest) {
      failures_.erase(f);
    }
    jobs_.erase(it);
    evicted.push_back(oldest);
  }
  return evicted;
}

void JobTable::expire_failures(Clock::time_point now) {
  std::erase_if(failures_, [&](const auto& entry) { return entry.second.expires <= now; });
}

std::vector<Job> JobTable::list(std::optional<JobState> state, std::size_t limit) const {
  std::vector<Job> out;
  for (const auto& [id, job] : jobs_) {
    if (!state || job.state == *state) {
      out.push_back(job);
    }
  }
  std::sort(out.begin(), out.end(), [](const Job& a, const Job& b) {
    return a.submitted_ms != b.submitted_ms ? a.submitted_ms > b.submitted_ms : a.id < b.id;
  });
  if (out.size() > limit) {
    out.resize(limit);
  }
  return out;
}

} // namespace kcache::service
