#pragma once
// The daemon's small side databases (the job journal, the run reports): small
// records, so a small footprint (write buffer, open files, info logs).

#include <rocksdb/db.h>
#include <tl/expected.hpp>

#include <memory>
#include <string>

namespace kcache::service {

// Opens (creating) the database at `path`; the error names `what` and the path.
tl::expected<std::unique_ptr<rocksdb::DB>, std::string> open_small_rocksdb(const std::string& path,
                                                                           const std::string& what);

} // namespace kcache::service
