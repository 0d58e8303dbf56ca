#pragma once
// A shared object loaded straight from bytes (a memfd, then dlopen): compiled
// CPU kernels run without touching the disk. Unloaded with the object.

#include <string>

namespace kcache::compiler {

class MemoryObject {
public:
  explicit MemoryObject(const std::string& bytes);
  ~MemoryObject();
  MemoryObject(const MemoryObject&) = delete;
  MemoryObject& operator=(const MemoryObject&) = delete;

  // nullptr when not loaded or not found; error() says why it did not load.
  void* symbol(const std::string& name) const;
  const std::string& error() const { return error_; }

private:
  int fd_ = -1;
  void* handle_ = nullptr;
  std::string error_;
};

} // namespace kcache::compiler
