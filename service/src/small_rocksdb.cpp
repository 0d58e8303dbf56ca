#include "small_rocksdb.h"

namespace kcache::service {

tl::expected<std::unique_ptr<rocksdb::DB>, std::string>
open_small_rocksdb(const std::string& path, const std::string& what) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.write_buffer_size = 4 << 20;
  options.max_open_files = 64;
  options.keep_log_file_num = 2;
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status status = rocksdb::DB::Open(options, path, &raw);
  if (!status.ok()) {
    return tl::unexpected("cannot open the " + what + " at " + path + ": " + status.ToString());
  }
  return std::unique_ptr<rocksdb::DB>(raw);
}

} // namespace kcache::service
