#pragma once
// The single-node JobQueue: the order in memory (JobPriorityQueue), the
// records in the journal (JobJournal, RocksDB). Without a journal, jobs live
// only as long as the process (unit tests).

#include <kcache/service/job_journal.h>
#include <kcache/service/job_priority_queue.h>
#include <kcache/service/job_queue.h>

#include <map>
#include <memory>

namespace kcache::service {

class LocalJobQueue final : public JobQueue {
public:
  // Creates `journal_dir` if needed and opens the journal in it.
  static tl::expected<std::unique_ptr<LocalJobQueue>, std::string>
  open(std::size_t capacity, const std::string& journal_dir);
  LocalJobQueue(std::size_t capacity, std::unique_ptr<JobJournal> journal)
      : order_(capacity), journal_(std::move(journal)) {}

  bool push(const std::string& id, int priority, bool force) override {
    return order_.push(id, priority, force);
  }
  std::optional<std::string> pop() override { return order_.pop(); }
  bool remove(const std::string& id) override { return order_.remove(id); }
  std::optional<std::size_t> position(const std::string& id) const override {
    return order_.position(id);
  }
  std::size_t size() const override { return order_.size(); }
  std::size_t capacity() const override { return order_.capacity(); }

  tl::expected<void, std::string> put(const Job& job) override;
  tl::expected<void, std::string> erase(const std::string& id) override;
  std::vector<Job> load() const override;

private:
  JobPriorityQueue order_;
  std::unique_ptr<JobJournal> journal_; // null: in memory only
  std::map<std::string, Job> memory_;   // the records when there is no journal
};

} // namespace kcache::service
