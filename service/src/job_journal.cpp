#include <kcache/service/job_journal.h>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <spdlog/spdlog.h>

namespace kcache::service {

JobJournal::JobJournal(PrivateTag, std::unique_ptr<rocksdb::DB> db) : db_(std::move(db)) {}

JobJournal::~JobJournal() = default;

tl::expected<std::unique_ptr<JobJournal>, std::string> JobJournal::open(const std::string& path) {
  rocksdb::Options options;
  options.create_if_missing = true;
  // A small database of small records: keep its footprint small too.
  options.write_buffer_size = 4 << 20;
  options.max_open_files = 64;
  options.keep_log_file_num = 2;
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status status = rocksdb::DB::Open(options, path, &raw);
  if (!status.ok()) {
    return tl::unexpected("cannot open the job journal at " + path + ": " + status.ToString());
  }
  return std::make_unique<JobJournal>(PrivateTag{}, std::unique_ptr<rocksdb::DB>(raw));
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
