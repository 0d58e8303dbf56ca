#pragma once
// The durable job journal: every job's record in its own RocksDB database
// (<data_dir>/jobs), written at submission, start and finish. After a crash or
// kill -9, kcached reads it back: queued and running jobs run again, failed
// ones restore the negative cache, finished ones the history. The WAL is on:
// a journal write survives the process dying right after it.

#include <kcache/service/job.h>

#include <tl/expected.hpp>

#include <memory>
#include <string>
#include <vector>

namespace rocksdb {
class DB;
}

namespace kcache::service {

class JobJournal {
public:
  static tl::expected<std::unique_ptr<JobJournal>, std::string> open(const std::string& path);
  ~JobJournal();
  JobJournal(const JobJournal&) = delete;
  JobJournal& operator=(const JobJournal&) = delete;

  tl::expected<void, std::string> put(const Job& job);
  tl::expected<void, std::string> erase(const std::string& id);
  // Every readable record; unreadable ones are logged and skipped.
  std::vector<Job> load() const;

  struct PrivateTag {
    explicit PrivateTag() = default;
  };
  JobJournal(PrivateTag, std::unique_ptr<rocksdb::DB> db);

private:
  std::unique_ptr<rocksdb::DB> db_;
};

} // namespace kcache::service
