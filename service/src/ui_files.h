#pragma once
// The dashboard's files (service/ui/), embedded at build time by
// cmake/embed_files.cmake into a generated source: a fixed table, never the
// file system, so no request path can name anything else.

#include <span>
#include <string_view>

namespace kcache::service {

struct EmbeddedFile {
  std::string_view path; // under service/ui/, e.g. "index.html"
  std::string_view body;
};

std::span<const EmbeddedFile> embedded_ui_files();

} // namespace kcache::service
