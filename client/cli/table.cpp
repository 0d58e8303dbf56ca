#include "table.h"

#include <algorithm>
#include <cstdint>

namespace kcache::cli {

void Table::column(std::string header, Align align) {
  headers_.push_back(std::move(header));
  aligns_.push_back(align);
}

void Table::row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<std::size_t> width(headers_.size());
  for (std::size_t c = 0; c < headers_.size(); ++c) {
    width[c] = headers_[c].size();
    for (const auto& r : rows_) {
      width[c] = std::max(width[c], r[c].size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      const bool last = c + 1 == cells.size();
      out += aligns_[c] == Align::kRight ? pad + cells[c] : cells[c] + (last ? "" : pad);
      out += last ? "\n" : "  ";
    }
    return out;
  };
  std::string out = line(headers_);
  for (const auto& r : rows_) {
    out += line(r);
  }
  return out;
}

std::string format_age(std::int64_t unix_ms, std::int64_t now_ms) {
  if (unix_ms <= 0) {
    return "-";
  }
  const std::int64_t s = std::max<std::int64_t>(0, (now_ms - unix_ms) / 1000);
  if (s < 60) {
    return std::to_string(s) + "s ago";
  }
  if (s < 3600) {
    return std::to_string(s / 60) + "m ago";
  }
  if (s < 86400) {
    return std::to_string(s / 3600) + "h ago";
  }
  return std::to_string(s / 86400) + "d ago";
}

} // namespace kcache::cli
