#include <kcache/compiler/memory_object.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

namespace kcache::compiler {

MemoryObject::MemoryObject(const std::string& bytes) {
  fd_ = ::memfd_create("kcache-kernel.so", MFD_CLOEXEC);
  if (fd_ < 0 || ::write(fd_, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    error_ = "cannot stage the shared object in memory";
    return;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd_);
  handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    error_ = ::dlerror();
  }
}

MemoryObject::~MemoryObject() {
  if (handle_ != nullptr) {
    ::dlclose(handle_);
  }
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

void* MemoryObject::symbol(const std::string& name) const {
  return handle_ == nullptr ? nullptr : ::dlsym(handle_, name.c_str());
}

} // namespace kcache::compiler
