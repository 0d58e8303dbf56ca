#include <kcache/protocol/url.h>

#include <algorithm>
#include <charconv>

namespace kcache::protocol {

std::string percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      unsigned value = 0;
      const auto [ptr, ec] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
      if (ec == std::errc() && ptr == text.data() + i + 3) {
        out += static_cast<char>(value);
        i += 2;
        continue;
      }
    }
    out += text[i] == '+' ? ' ' : text[i];
  }
  return out;
}

std::optional<std::string> percent_decode_strict(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    unsigned value = 0;
    const char* first = text.data() + i + 1;
    const char* last = text.data() + std::min(i + 3, text.size());
    const auto [ptr, ec] = std::from_chars(first, last, value, 16);
    if (last - first != 2 || ec != std::errc() || ptr != last) {
      return std::nullopt;
    }
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

std::string url_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || c == '.' || c == '~' || c == ':';
    if (plain) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::vector<QueryParam> split_query(std::string_view query) {
  std::vector<QueryParam> params;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const auto eq = pair.find('=');
    params.push_back(QueryParam{
        pair.substr(0, eq), eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1),
        eq != std::string_view::npos});
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
  }
  return params;
}

} // namespace kcache::protocol
