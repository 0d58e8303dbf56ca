#include "small_rocksdb.h"

#include <kcache/service/job_journal.h>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <spdlog/spdlog.h>

namespace kcache::service {

JobJournal::JobJournal(PrivateTag, std::unique_ptr<rocksdb::DB> db) : db_(std::move(db)) {}

JobJournal::~JobJournal() = default;

tl::expected<std::unique_ptr<JobJournal>, std::string> JobJournal::open(const std::string& path) {
  auto db = open_small_rocksdb(path, "job journal");
  if (!db) {
    return tl::unexpected(db.error());
  }
  return std::make_unique<JobJournal>(PrivateTag{}, std::move(*db));
}

tl::expected<void, std::string> JobJournal::put(const Job& job) {
  const rocksdb::Status status =
      db_->Put(rocksdb::WriteOptions(), job.id, job_to_json(job, /*with_spec=*/true));
  if (!status.ok()) {
    return tl::unexpected("job journal: " + status.ToString());
  }
  return {};
}

tl::expected<void, std::string> JobJournal::erase(const std::string& id) {
  const rocksdb::Status status = db_->Delete(rocksdb::WriteOptions(), id);
  if (!status.ok()) {
    return tl::unexpected("job journal: " + status.ToString());
  }
  return {};
}

std::vector<Job> JobJournal::load() const {
  std::vector<Job> jobs;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    auto job = job_from_json(it->value().ToStringView());
    if (!job) {
      spdlog::warn("job journal: skipping unreadable record {}: {}", it->key().ToString(),
                   job.error());
      continue;
    }
    jobs.push_back(std::move(*job));
  }
  if (!it->status().ok()) {
    spdlog::warn("job journal: read stopped early: {}", it->status().ToString());
  }
  return jobs;
}

} // namespace kcache::service
