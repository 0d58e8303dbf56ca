#pragma once
// Loads a native object produced by a backend into this process with LLVM's
// ORC JIT linker and finds its functions: how CPU kernels are run for
// checking and benchmarking (no shared library, no dlopen of a temp file).

#include <tl/expected.hpp>

#include <memory>
#include <string>

namespace kcache::compiler {

class ObjectLoader {
public:
  static tl::expected<std::unique_ptr<ObjectLoader>, std::string> load(const std::string& object);
  ~ObjectLoader();

  // The address of a defined symbol, or an error naming it.
  tl::expected<void*, std::string> symbol(const std::string& name);

  template <typename Fn> tl::expected<Fn*, std::string> function(const std::string& name) {
    auto address = symbol(name);
    if (!address) {
      return tl::unexpected(address.error());
    }
    return reinterpret_cast<Fn*>(*address);
  }

  struct Impl;
  explicit ObjectLoader(std::unique_ptr<Impl> impl);

private:
  std::unique_ptr<Impl> impl_;
};

} // namespace kcache::compiler
