#include <kcache/compiler/object_loader.h>

#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>

#include <mutex>

namespace kcache::compiler {

struct ObjectLoader::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

ObjectLoader::ObjectLoader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ObjectLoader::~ObjectLoader() = default;

tl::expected<std::unique_ptr<ObjectLoader>, std::string>
ObjectLoader::load(const std::string& object) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) {
    return tl::unexpected("cannot start the ORC JIT: " + llvm::toString(jit.takeError()));
  }
  if (auto err = (*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object, "kernel.o"))) {
    return tl::unexpected("cannot load the object: " + llvm::toString(std::move(err)));
  }
  auto impl = std::make_unique<Impl>();
  impl->jit = std::move(*jit);
  return std::make_unique<ObjectLoader>(std::move(impl));
}

tl::expected<void*, std::string> ObjectLoader::symbol(const std::string& name) {
  auto address = impl_->jit->lookup(name);
  if (!address) {
    return tl::unexpected("symbol '" + name + "': " + llvm::toString(address.takeError()));
  }
  return address->toPtr<void*>();
}

} // namespace kcache::compiler
