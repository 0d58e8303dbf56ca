#pragma once
// The one storage interface every tier implements (memory, RocksDB, Redis, and
// the decorators that compose them). Modelled on ccache's remote storage and
// Buildbarn's BlobAccess: small, and failures are values, never exceptions.
//
// A miss is not an error: get() returns an empty optional. Errors mean the tier
// could not answer (unreachable, timed out, I/O failure); callers that fail
// open treat them as misses, but count them apart.

#include <kcache/protocol/clock.h>
#include <kcache/storage/store_counters.h>

#include <tl/expected.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::storage {

// Action cache (key -> manifest) and CAS (sha256 -> blob), as in Bazel's REAPI.
enum class Area : std::uint8_t { kAction = 0, kCas = 1 };
std::string_view area_name(Area area);

// Values are byte strings; std::string keeps RocksDB and hiredis copies cheap.
using Bytes = std::string;

struct StoreError {
  // kNoSpace: the tier's disk (or its configured capacity) cannot take more;
  // reads still work. kcached answers it 507 Insufficient Storage.
  // kUnsupported: the tier cannot answer this kind of call (list_top on a
  // tier that keeps no order); the caller takes another way.
  enum class Code {
    kUnavailable,
    kTimeout,
    kIo,
    kCorrupt,
    kInvalidArgument,
    kTooLarge,
    kNoSpace,
    kUnsupported
  };
  Code code = Code::kIo;
  std::string message;
  // Refused without trying (an open circuit breaker, or a Redis node that did
  // not answer earlier in the same request: RedisCallScope): counted as rejected,
  // not as an error, so a dead tier's error count stays its real failures.
  bool rejected = false;
};
std::string_view error_code_name(StoreError::Code code);

template <typename T> using Result = tl::expected<T, StoreError>;
using GetResult = Result<std::optional<Bytes>>;

// An immutable value that may be shared: the memory tier hands out the buffer
// it holds (get_shared), so a hit served from memory copies none of its
// bytes; the socket write references them while the tier may drop them.
// Copying a SharedBytes copies a reference. Made from a string, it takes the
// string over. Reads as a std::string_view; compares by content.
class SharedBytes {
public:
  SharedBytes() = default;
  SharedBytes(Bytes bytes) : bytes_(std::make_shared<const Bytes>(std::move(bytes))) {}
  SharedBytes(const char* text) : SharedBytes(Bytes(text)) {}
  explicit SharedBytes(std::shared_ptr<const Bytes> bytes) : bytes_(std::move(bytes)) {}

  std::string_view view() const { return bytes_ ? std::string_view(*bytes_) : std::string_view(); }
  operator std::string_view() const { return view(); }
  const char* data() const { return view().data(); }
  std::size_t size() const { return view().size(); }
  bool empty() const { return size() == 0; }
  // The bytes in a string of their own (a copy).
  Bytes str() const { return Bytes(view()); }
  // True when both reference one buffer: no copy was made between them.
  bool shares(const SharedBytes& other) const { return bytes_ && bytes_ == other.bytes_; }
  const std::shared_ptr<const Bytes>& buffer() const { return bytes_; }

  friend bool operator==(const SharedBytes& a, std::string_view b) { return a.view() == b; }
  // Exact: a string literal or a std::string compares as a string_view.
  template <std::same_as<SharedBytes> T> friend bool operator==(const T& a, const T& b) {
    return a.view() == b.view();
  }
  friend std::ostream& operator<<(std::ostream& os, const SharedBytes& b) { return os << b.view(); }

private:
  std::shared_ptr<const Bytes> bytes_;
};
using SharedGetResult = Result<std::optional<SharedBytes>>;

struct ObjectInfo {
  Area area = Area::kAction;
  std::string key;
  std::uint64_t size = 0;          // bytes as stored (framed, compressed)
  std::int64_t created_ms = 0;     // unix ms; 0 when the tier does not know
  std::int64_t last_access_ms = 0; // unix ms; 0 when the tier does not know
  std::uint64_t hits = 0;          // reads served; 0 when the tier does not count them
};

// Where a listing goes on from: an entry's area and key.
struct ListCursor {
  Area area = Area::kAction;
  std::string key;
};

// list() returns entries in (area, key) order, action records first; with a
// limit, the first `limit` of them. A page after a cursor is then one seek
// in an ordered tier (RocksDB, memory), whatever the tier holds.
struct ListOptions {
  std::optional<Area> area; // both areas when empty
  std::string prefix;       // key prefix filter
  std::size_t limit = SIZE_MAX;
  std::optional<ListCursor> after; // only entries after this one
  // Only what get() would serve: a tier that checks records (signatures)
  // omits the ones it would refuse. For listings people read (`kcache ls`);
  // gc and verify walk everything stored.
  bool servable_only = false;
};

// The orders list_top() keeps besides key order: largest value first (the
// biggest, newest, most recently read, most read), ties by (area, key).
enum class ListOrder : std::uint8_t { kSize, kCreated, kLastAccess, kHits };
// The value `order` sorts `info` by.
std::uint64_t order_value(const ObjectInfo& info, ListOrder order);
// True when `a` comes before `b` in `order`.
bool comes_before(const ObjectInfo& a, const ObjectInfo& b, ListOrder order);

struct TopListOptions {
  ListOrder order = ListOrder::kLastAccess;
  std::size_t limit = 0;
  bool servable_only = false; // as ListOptions::servable_only
  std::optional<Area> area;   // both areas when empty
};

struct TopList {
  std::vector<ObjectInfo> rows; // the first `limit` entries (of the area) in the order
  // Entries the tier holds (of the area, or both). Exact for one tier; a
  // composed store may only estimate the union of its tiers.
  std::uint64_t entries = 0;
  bool entries_exact = true;
};

class Store {
public:
  virtual ~Store() = default;
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // For logs and metrics: "memory", "rocksdb", "redis", "tiered".
  virtual std::string name() const = 0;

  virtual GetResult get(Area area, std::string_view key) = 0;
  // get() without its side effects: no access time or hit recorded, no
  // backfill, no counted outcome. For what people look at (`kcache ls`
  // sizes), which must not make an entry look used. The default is get(),
  // right for a tier that records nothing on a read.
  virtual GetResult peek(Area area, std::string_view key) { return get(area, key); }
  virtual Result<void> put(Area area, std::string_view key, std::string_view value) = 0;
  virtual Result<bool> contains(Area area, std::string_view key) = 0;
  // Removing a missing key succeeds.
  virtual Result<void> remove(Area area, std::string_view key) = 0;
  virtual Result<std::vector<ObjectInfo>> list(const ListOptions& options) = 0;
  // Whether list() after a cursor seeks (costs about what it returns) rather
  // than scanning everything the tier holds (Redis keeps no order): callers
  // that would skip ahead by many small lists ask first.
  virtual bool lists_by_seek() const { return true; }
  // The first entries in a size, time or hits order, from an index the tier
  // keeps: a page costs what it returns, not a read of every entry. The
  // default answers kUnsupported (a tier that keeps no such order, Redis):
  // the caller then reads the whole listing (service/src/entry_pages.h).
  virtual Result<TopList> list_top(const TopListOptions& options);
  // The listing rows of these entries, as list() would give them (nullopt:
  // not held), without reading their values or counting a read. The default
  // lists each one; RocksDB and memory answer all at once.
  virtual Result<std::vector<std::optional<ObjectInfo>>>
  describe(std::span<const ListCursor> entries);
  // One result per key, in order. The default asks get() per key; tiers with a
  // native batch read (RocksDB MultiGet, Redis MGET) override it.
  virtual std::vector<GetResult> get_many(Area area, std::span<const std::string> keys);

  // get() and get_many() handing out shared values. A tier that keeps
  // values in memory returns its own buffer; the default takes over what
  // get() returns (a move, no copy). Decorators pass these through, so a
  // memory-tier hit reaches the caller without a copy.
  virtual SharedGetResult get_shared(Area area, std::string_view key);
  virtual std::vector<SharedGetResult> get_many_shared(Area area,
                                                       std::span<const std::string> keys);
  // put() of a value already shared: a tier that keeps values in memory keeps
  // this buffer (a backfill then copies nothing); the default is put().
  virtual Result<void> put_shared(Area area, std::string_view key, const SharedBytes& value) {
    return put(area, key, value.view());
  }

  // What this store has counted. A plain tier reports only the events no
  // caller can see (evictions, corrupt values); CountingStore adds the outcome
  // of every call made through it.
  virtual CounterSnapshot counters() const { return {}; }
  // What the tier holds now; decorators ask the store they wrap.
  virtual StoreUsage usage() const { return {}; }
};

// Wall-clock now in unix milliseconds (stored metadata uses wall time).
using protocol::unix_now_ms;

} // namespace kcache::storage
