#pragma once
// Files the CLI writes (`get -o`, `pack-headers -o`): whole or not at all.

#include <tl/expected.hpp>

#include <string>
#include <string_view>

namespace kcache::cli {

// Writes `data` to a temporary file beside `path`, syncs it and renames it
// over `path`: a reader never sees half a file, and a failure (no such
// directory, full disk, permissions) is an error naming the path, never a
// silent success. Existing files at `path` are replaced only on success.
tl::expected<void, std::string> write_file_atomically(const std::string& path,
                                                      std::string_view data);

} // namespace kcache::cli
