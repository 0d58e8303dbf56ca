#pragma once
// Links a relocatable x86-64 object into a shared object ready for dlopen, with
// lld's ELF driver in process (no linker subprocess). The result needs no libc
// at link time: undefined symbols (libm's expf, say) bind when it is loaded.

#include <kcache/compiler/backend.h>

#include <string>
#include <string_view>

namespace kcache::compiler {

tl::expected<std::string, CompileError> link_shared_object(std::string_view object);
std::string lld_version();

} // namespace kcache::compiler
