#include <kcache/cachekey/tensor_type.h>

namespace kcache::cachekey {
namespace {
void append_dims(std::string& out, const std::vector<Dim>& dims) {
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) {
      out += ',';
    }
    if (const auto* size = std::get_if<std::int64_t>(&dims[i].value)) {
      out += std::to_string(*size);
    } else {
      out += std::get<std::string>(dims[i].value);
    }
  }
}
} // namespace

std::string to_string(const TensorType& type) {
  std::string out = type.dtype + "[";
  append_dims(out, type.shape);
  out += ']';
  if (!type.strides.empty()) {
    out += '{';
    append_dims(out, type.strides);
    out += '}';
  }
  return out;
}

} // namespace kcache::cachekey
