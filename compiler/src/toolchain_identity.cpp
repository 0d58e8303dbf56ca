#include "toolchain_identity.h"

#include <kcache/cachekey/sha256.h>

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <vector>

namespace kcache::compiler {
namespace fs = std::filesystem;

namespace {

std::string stat_line(const std::string& path, const struct stat& st) {
  const long long ns = static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000LL +
                       static_cast<long long>(st.st_mtim.tv_nsec);
  return path + ":" + std::to_string(st.st_size) + ":" + std::to_string(ns);
}

} // namespace

std::string file_identity(const std::string& path) {
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  struct stat st {};
  if (ec || ::stat(real.c_str(), &st) != 0) {
    return "missing:" + path;
  }
  return stat_line(real.string(), st);
}

std::string library_path(const void* symbol) {
  Dl_info info{};
  if (::dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) {
    return {};
  }
  std::error_code ec;
  const fs::path real = fs::canonical(info.dli_fname, ec);
  return ec ? std::string(info.dli_fname) : real.string();
}

std::string library_identity(const void* symbol) {
  const std::string path = library_path(symbol);
  return path.empty() ? "unknown" : file_identity(path);
}

std::string library_root(const void* symbol) {
  const std::string lib = library_path(symbol);
  return lib.empty() ? std::string() : fs::path(lib).parent_path().parent_path().string();
}

std::string tree_digest(std::span<const std::string> dirs) {
  cachekey::Sha256 hash;
  for (const std::string& dir : dirs) {
    std::vector<std::string> lines;
    std::error_code ec;
    fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
    if (ec) {
      hash.update("missing:" + dir + "\n");
      continue;
    }
    for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
      if (ec) {
        break;
      }
      const std::string relative = it->path().lexically_relative(dir).string();
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) != 0) {
        continue;
      }
      if (S_ISLNK(st.st_mode)) {
        lines.push_back(relative + " -> " + fs::read_symlink(it->path(), ec).string());
      } else if (S_ISREG(st.st_mode)) {
        lines.push_back(stat_line(relative, st));
      }
    }
    std::sort(lines.begin(), lines.end());
    hash.update(dir + "\n");
    for (const std::string& line : lines) {
      hash.update(line).update("\n");
    }
  }
  return cachekey::to_hex(hash.finish());
}

} // namespace kcache::compiler
