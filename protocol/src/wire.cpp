#include <kcache/protocol/wire.h>

#include <algorithm>
#include <cstring>

namespace kcache::protocol::wire {
namespace {

constexpr char kMagic[4] = {'K', 'C', 'P', '1'};

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
}

// Reads `bytes` little-endian bytes at `pos`, advancing it; false if short.
bool get_le(std::string_view in, std::size_t& pos, int bytes, std::uint64_t& v) {
  if (in.size() - pos < static_cast<std::size_t>(bytes)) {
    return false;
  }
  v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(in[pos + static_cast<std::size_t>(i)]);
  }
  pos += static_cast<std::size_t>(bytes);
  return true;
}

} // namespace

std::string encode_parts(const std::vector<Part>& parts) {
  std::size_t total = 8;
  for (const Part& p : parts) {
    total += 12 + p.name.size() + p.data.size();
  }
  std::string out;
  out.reserve(total);
  out.append(kMagic, 4);
  put_le(out, parts.size(), 4);
  for (const Part& p : parts) {
    put_le(out, p.name.size(), 4);
    out.append(p.name);
    put_le(out, p.data.size(), 8);
    out.append(p.data);
  }
  return out;
}

std::string encode_parts_prefix(std::size_t count) {
  std::string out(kMagic, 4);
  put_le(out, count, 4);
  return out;
}

std::string encode_part_head(std::string_view name, std::uint64_t size) {
  std::string out;
  out.reserve(part_head_size(name));
  put_le(out, name.size(), 4);
  out.append(name);
  put_le(out, size, 8);
  return out;
}

tl::expected<std::vector<Part>, std::string> decode_parts(std::string_view body) {
  if (body.size() < 8 || std::memcmp(body.data(), kMagic, 4) != 0) {
    return tl::unexpected(std::string("not a kcache parts body (bad magic)"));
  }
  std::size_t pos = 4;
  std::uint64_t count = 0;
  get_le(body, pos, 4, count);
  // Each part needs at least 12 bytes: a count beyond that is a lie.
  if (count > (body.size() - pos) / 12) {
    return tl::unexpected("parts body claims " + std::to_string(count) + " parts");
  }
  std::vector<Part> parts;
  parts.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t name_len = 0, data_len = 0;
    if (!get_le(body, pos, 4, name_len) || body.size() - pos < name_len) {
      return tl::unexpected("part " + std::to_string(i) + ": truncated name");
    }
    Part part;
    part.name.assign(body.substr(pos, name_len));
    pos += name_len;
    if (!get_le(body, pos, 8, data_len) || body.size() - pos < data_len) {
      return tl::unexpected("part " + std::to_string(i) + ": truncated data");
    }
    part.data.assign(body.substr(pos, data_len));
    pos += data_len;
    parts.push_back(std::move(part));
  }
  if (pos != body.size()) {
    return tl::unexpected(std::string("trailing bytes after the last part"));
  }
  return parts;
}

bool is_valid_action_key(std::string_view key) {
  return !key.empty() && key.size() <= 512 && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '+' || c == '=' || c == '-';
  });
}

bool is_valid_cas_key(std::string_view key) {
  return key.size() == 64 && std::all_of(key.begin(), key.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

} // namespace kcache::protocol::wire
