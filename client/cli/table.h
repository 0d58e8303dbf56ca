#pragma once
// Plain-text tables for the CLI: left-aligned text, right-aligned numbers.

#include <string>
#include <vector>

namespace kcache::cli {

class Table {
public:
  enum class Align { kLeft, kRight };
  void column(std::string header, Align align = Align::kLeft);
  void row(std::vector<std::string> cells);
  std::string render() const;
  bool empty() const { return rows_.empty(); }

private:
  std::vector<std::string> headers_;
  std::vector<Align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

// "3s ago", "5m ago", "2h ago", "4d ago"; "-" for 0.
std::string format_age(std::int64_t unix_ms, std::int64_t now_ms);

} // namespace kcache::cli
