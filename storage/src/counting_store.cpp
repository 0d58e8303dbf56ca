#include <kcache/storage/counting_store.h>

namespace kcache::storage {

CountingStore::CountingStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {}

void CountingStore::count_error(const StoreError& error) {
  if (error.rejected) {
    rejected_.add();
  } else if (error.code != StoreError::Code::kTooLarge) {
    errors_.add();
  }
  if (error.code == StoreError::Code::kNoSpace) {
    no_space_.add();
  }
}

template <typename R> void CountingStore::count_get(const R& result) {
  if (!result) {
    count_error(result.error());
  } else if (result->has_value()) {
    hits_.add();
    bytes_read_.add((*result)->size());
  } else {
    misses_.add();
  }
}

GetResult CountingStore::get(Area area, std::string_view key) {
  GetResult result = inner_->get(area, key);
  count_get(result);
  return result;
}

GetResult CountingStore::peek(Area area, std::string_view key) {
  return inner_->peek(area, key);
}

std::vector<GetResult> CountingStore::get_many(Area area, std::span<const std::string> keys) {
  std::vector<GetResult> results = inner_->get_many(area, keys);
  for (const GetResult& result : results) {
    count_get(result);
  }
  return results;
}

SharedGetResult CountingStore::get_shared(Area area, std::string_view key) {
  SharedGetResult result = inner_->get_shared(area, key);
  count_get(result);
  return result;
}

std::vector<SharedGetResult> CountingStore::get_many_shared(Area area,
                                                            std::span<const std::string> keys) {
  std::vector<SharedGetResult> results = inner_->get_many_shared(area, keys);
  for (const SharedGetResult& result : results) {
    count_get(result);
  }
  return results;
}

void CountingStore::count_put(const Result<void>& result, std::size_t bytes) {
  if (result) {
    puts_.add();
    bytes_written_.add(bytes);
  } else {
    count_error(result.error());
  }
}

Result<void> CountingStore::put(Area area, std::string_view key, std::string_view value) {
  Result<void> result = inner_->put(area, key, value);
  count_put(result, value.size());
  return result;
}

Result<void> CountingStore::put_shared(Area area, std::string_view key, const SharedBytes& value) {
  Result<void> result = inner_->put_shared(area, key, value);
  count_put(result, value.size());
  return result;
}

Result<bool> CountingStore::contains(Area area, std::string_view key) {
  Result<bool> result = inner_->contains(area, key);
  if (!result) {
    count_error(result.error());
  }
  return result;
}

Result<void> CountingStore::remove(Area area, std::string_view key) {
  Result<void> result = inner_->remove(area, key);
  if (!result) {
    count_error(result.error());
  }
  return result;
}

Result<std::vector<ObjectInfo>> CountingStore::list(const ListOptions& options) {
  Result<std::vector<ObjectInfo>> result = inner_->list(options);
  if (!result) {
    count_error(result.error());
  }
  return result;
}

CounterSnapshot CountingStore::counters() const {
  CounterSnapshot own;
  own.hits = hits_.load();
  own.misses = misses_.load();
  own.errors = errors_.load();
  own.rejected = rejected_.load();
  own.no_space = no_space_.load();
  own.puts = puts_.load();
  own.bytes_read = bytes_read_.load();
  own.bytes_written = bytes_written_.load();
  return own + inner_->counters();
}

} // namespace kcache::storage
