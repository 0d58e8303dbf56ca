#pragma once
// The kcache wire protocol's shared pieces, used by the daemon and every client
// (kept in protocol, the layer below both).
//
// HTTP/1.1, JSON for control, raw bytes for blobs. Multi-part bodies (an
// artifact with its files, a batch of artifacts) use one framing,
// content type "application/x-kcache-parts":
//
//   "KCP1" | u32 part count | per part: u32 name length | name | u64 size | bytes
//
// all integers little-endian. Decoding checks every length against the buffer.

#include <tl/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::protocol::wire {

inline constexpr std::string_view kPartsContentType = "application/x-kcache-parts";
inline constexpr std::string_view kJsonContentType = "application/json";
inline constexpr std::string_view kBytesContentType = "application/octet-stream";

struct Part {
  std::string name;
  std::string data;
  friend bool operator==(const Part&, const Part&) = default;
};

std::string encode_parts(const std::vector<Part>& parts);
tl::expected<std::vector<Part>, std::string> decode_parts(std::string_view body);
// The same encoding in pieces, for a body streamed part by part: the prefix
// ("KCP1" and the count), then per part its head (name and size) and its bytes.
std::string encode_parts_prefix(std::size_t count);
std::string encode_part_head(std::string_view name, std::uint64_t size);
inline constexpr std::uint64_t kPartsPrefixSize = 8;
inline constexpr std::uint64_t part_head_size(std::string_view name) {
  return 12 + name.size();
}

// Action-cache keys: 1-512 characters of [A-Za-z0-9._:+=-] (kcache's own
// "kc1-..." keys and clients' keys such as Inductor's alike). CAS keys are
// 64 lowercase hex digits.
bool is_valid_action_key(std::string_view key);
bool is_valid_cas_key(std::string_view key);

} // namespace kcache::protocol::wire
