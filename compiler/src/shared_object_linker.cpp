#include "shared_object_linker.h"

#include <lld/Common/Driver.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Support/raw_ostream.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

LLD_HAS_DRIVER(elf)

namespace kcache::compiler {
namespace {

// lld reads and writes files, so the link happens in a private directory that
// is removed however the link ends.
class ScratchDir {
public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kcache-link-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) {
      path_ = pattern;
    }
  }
  ~ScratchDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

CompileError link_error(std::string message, std::string log = {}) {
  return CompileError{CompileError::Code::kCompileFailed, std::move(message), std::move(log)};
}

} // namespace

// Debian's liblld-19-dev lacks lld/Common/Version.inc; lld ships with the LLVM
// release it is built against, so LLVM's version names it.
std::string lld_version() {
  return LLVM_VERSION_STRING;
}

tl::expected<std::string, CompileError> link_shared_object(std::string_view object) {
  ScratchDir dir;
  if (dir.path().empty()) {
    return tl::unexpected(CompileError{
        CompileError::Code::kInternal, "cannot create a scratch directory for linking", {}});
  }
  const std::string input = (dir.path() / "kernel.o").string();
  const std::string output = (dir.path() / "kernel.so").string();
  {
    std::ofstream out(input, std::ios::binary);
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    if (!out) {
      return tl::unexpected(
          CompileError{CompileError::Code::kInternal, "cannot write " + input, {}});
    }
  }
  const char* args[] = {"ld.lld",          "-shared", "--hash-style=gnu", "-z",         "now",
                        "--build-id=none", "-o",      output.c_str(),     input.c_str()};
  std::string log;
  llvm::raw_string_ostream log_stream(log);
  const lld::Result result =
      lld::lldMain(args, log_stream, log_stream, {{lld::Gnu, &lld::elf::link}});
  log_stream.flush();
  if (result.retCode != 0) {
    return tl::unexpected(link_error("lld could not link the shared object", log));
  }
  std::ifstream in(output, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) {
    return tl::unexpected(link_error("lld produced no shared object", log));
  }
  return bytes;
}

} // namespace kcache::compiler
