#pragma once
// What a backend's toolchain fingerprint says about files the compiler reads
// outside the spec: its libraries and the system include directories. Files
// are identified by path, size and modification time, not content: a package
// manager installs identical files with identical times on every node, the
// walk over /usr/include takes ~0.1 s where hashing its 300 MB would take
// seconds, and any upgrade changes size or time (ccache's compiler_check=mtime
// makes the same trade).

#include <span>
#include <string>

namespace kcache::compiler {

// "<realpath>:<size>:<mtime ns>" of the file, or "missing:<path>".
std::string file_identity(const std::string& path);
// The identity of the shared library that holds `symbol` (dladdr).
std::string library_identity(const void* symbol);
// The library file that holds `symbol`, resolved; "" if unknown.
std::string library_path(const void* symbol);
// The installation a library belongs to: <root>/lib/libx.so -> <root>.
std::string library_root(const void* symbol);
// SHA-256 hex over the sorted (relative path, size, mtime) of every file
// under the directories (symbolic links by their target text).
std::string tree_digest(std::span<const std::string> dirs);

} // namespace kcache::compiler
