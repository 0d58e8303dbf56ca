#include <kcache/service/job_queue_local.h>

#include <filesystem>

namespace kcache::service {

tl::expected<std::unique_ptr<LocalJobQueue>, std::string>
LocalJobQueue::open(std::size_t capacity, const std::string& journal_dir) {
  std::error_code ec;
  std::filesystem::create_directories(journal_dir, ec);
  auto journal = JobJournal::open(journal_dir);
  if (!journal) {
    return tl::unexpected(journal.error());
  }
  return std::make_unique<LocalJobQueue>(capacity, std::move(*journal));
}

tl::expected<void, std::string> LocalJobQueue::put(const Job& job) {
  if (!journal_) {
    memory_[job.id] = job;
    return {};
  }
  return journal_->put(job);
}

tl::expected<void, std::string> LocalJobQueue::erase(const std::string& id) {
  if (!journal_) {
    memory_.erase(id);
    return {};
  }
  return journal_->erase(id);
}

std::vector<Job> LocalJobQueue::load() const {
  if (!journal_) {
    std::vector<Job> jobs;
    for (const auto& [id, job] : memory_) {
      jobs.push_back(job);
    }
    return jobs;
  }
  return journal_->load();
}

} // namespace kcache::service
