#pragma once
// The most a zstd frame can decompress to, read from its block headers alone
// (RFC 8878, section 3.1.1): raw and RLE blocks state their size, a compressed
// block regenerates at most 128 KiB. Unlike ZSTD_decompressBound this never
// trusts the frame's own content-size field, so a small frame claiming
// gigabytes is refused before anything is allocated. Internal to storage.

#include <cstdint>
#include <optional>
#include <string_view>

namespace kcache::storage::detail {

// Empty unless `payload` is exactly one well-formed zstd frame.
std::optional<std::uint64_t> zstd_decompressed_bound(std::string_view payload);

} // namespace kcache::storage::detail
