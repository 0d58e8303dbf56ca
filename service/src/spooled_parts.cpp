#include "spooled_parts.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/storage/chunked_blob.h>

#include <algorithm>

namespace kcache::service {

namespace {

constexpr std::string_view kMagic = "KCP1";

PartsError malformed(std::string message) {
  return {true, std::move(message)};
}

// A little-endian integer of `width` bytes at `at`.
tl::expected<std::uint64_t, PartsError> read_le(UploadSpool& spool, std::uint64_t at,
                                                std::size_t width) {
  auto bytes = spool.read_at(at, width);
  if (!bytes) {
    return tl::unexpected(PartsError{false, bytes.error()});
  }
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < width; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>((*bytes)[i])) << (8 * i);
  }
  return v;
}

} // namespace

tl::expected<std::vector<SpooledPart>, PartsError> index_spooled_parts(UploadSpool& spool) {
  const std::uint64_t size = spool.size();
  if (size < 8) {
    return tl::unexpected(malformed("not a kcache parts body (bad magic)"));
  }
  auto magic = spool.read_at(0, kMagic.size());
  if (!magic) {
    return tl::unexpected(PartsError{false, magic.error()});
  }
  if (*magic != kMagic) {
    return tl::unexpected(malformed("not a kcache parts body (bad magic)"));
  }
  auto count = read_le(spool, 4, 4);
  if (!count) {
    return tl::unexpected(count.error());
  }
  std::uint64_t pos = 8;
  // Each part needs at least 12 bytes: a count beyond that is a lie.
  if (*count > (size - pos) / 12) {
    return tl::unexpected(malformed("parts body claims " + std::to_string(*count) + " parts"));
  }
  if (*count > kMaxSpooledParts) {
    return tl::unexpected(
        malformed("at most " + std::to_string(kMaxSpooledParts) + " parts in an artifact"));
  }
  std::vector<SpooledPart> parts;
  parts.reserve(*count);
  std::uint64_t names = 0;
  for (std::uint64_t i = 0; i < *count; ++i) {
    const std::string where = "part " + std::to_string(i);
    if (size - pos < 4) {
      return tl::unexpected(malformed(where + ": truncated name"));
    }
    auto name_len = read_le(spool, pos, 4);
    if (!name_len) {
      return tl::unexpected(name_len.error());
    }
    pos += 4;
    if (size - pos < *name_len) {
      return tl::unexpected(malformed(where + ": truncated name"));
    }
    names += *name_len;
    if (*name_len > kMaxSpooledPartName || names > kMaxSpooledNames) {
      return tl::unexpected(malformed(where + ": names over " +
                                      std::to_string(kMaxSpooledPartName) + " bytes each or " +
                                      std::to_string(kMaxSpooledNames) + " in all"));
    }
    auto name = spool.read_at(pos, static_cast<std::size_t>(*name_len));
    if (!name) {
      return tl::unexpected(PartsError{false, name.error()});
    }
    SpooledPart part{std::string(*name), 0, 0};
    pos += *name_len;
    if (size - pos < 8) {
      return tl::unexpected(malformed(where + ": truncated data"));
    }
    auto data_len = read_le(spool, pos, 8);
    if (!data_len) {
      return tl::unexpected(data_len.error());
    }
    pos += 8;
    if (size - pos < *data_len) {
      return tl::unexpected(malformed(where + ": truncated data"));
    }
    part.offset = pos;
    part.size = *data_len;
    pos += *data_len;
    parts.push_back(std::move(part));
  }
  if (pos != size) {
    return tl::unexpected(malformed("trailing bytes after the last part"));
  }
  return parts;
}

storage::Result<storage::OutputRef> store_spooled_part(storage::Store& store, UploadSpool& spool,
                                                       const SpooledPart& part) {
  auto read_error = [](const std::string& why) {
    return tl::unexpected(storage::StoreError{storage::StoreError::Code::kIo, why});
  };
  storage::OutputRef out{part.name, std::string(), part.size, {}};
  if (part.size <= storage::kChunkThreshold) {
    auto data = spool.read_at(part.offset, static_cast<std::size_t>(part.size));
    if (!data) {
      return read_error(data.error());
    }
    out.digest = cachekey::to_hex(cachekey::Sha256::of(*data));
    auto chunks = storage::put_blob(store, out.digest, *data);
    if (!chunks) {
      return tl::unexpected(chunks.error());
    }
    return out;
  }
  // Hashed as the chunks go by: the digest is of the bytes stored.
  cachekey::Sha256 whole;
  for (std::uint64_t at = 0; at < part.size; at += storage::kChunkSize) {
    const auto n =
        static_cast<std::size_t>(std::min<std::uint64_t>(storage::kChunkSize, part.size - at));
    auto data = spool.read_at(part.offset + at, n);
    if (!data) {
      return read_error(data.error());
    }
    whole.update(*data);
    auto chunk = storage::put_chunk(store, *data);
    if (!chunk) {
      return tl::unexpected(chunk.error());
    }
    out.chunks.push_back(std::move(*chunk));
  }
  out.digest = cachekey::to_hex(whole.finish());
  return out;
}

} // namespace kcache::service
