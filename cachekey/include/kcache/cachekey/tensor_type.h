#pragma once
// Tensor types as they enter a graph digest: dtype, shape and strides, where
// each dimension is either a constant or a symbol ("s0", "batch").

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace kcache::cachekey {

struct Dim {
  std::variant<std::int64_t, std::string> value;

  static Dim fixed(std::int64_t size) { return Dim{size}; }
  static Dim symbol(std::string name) { return Dim{std::move(name)}; }
  bool is_symbol() const { return std::holds_alternative<std::string>(value); }
  friend bool operator==(const Dim&, const Dim&) = default;
};

struct TensorType {
  std::string dtype; // "f32", "bf16", "i64", ...
  std::vector<Dim> shape;
  std::vector<Dim> strides; // empty: contiguous (row-major) layout
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

// "f32[s0,128]{128,1}": the human-readable form used by explain and the CLI.
std::string to_string(const TensorType& type);

} // namespace kcache::cachekey
