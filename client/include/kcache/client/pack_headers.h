#pragma once
// Packs the headers a compile spec includes from the submitter's disk into
// the spec. kcached refuses specs whose options name host paths (-I DIR,
// -isystem, --include-path=...) or whose sources include absolute or ".."
// paths: a worker reads only what the spec carries plus toolchain headers.
//
// pack_headers() takes the include directories out of the spec's options
// (cuda: NVRTC's -I/--include-path; cpp: clang's -I, -iquote, -isystem,
// -isystem-after, -idirafter) and searches them as the compiler would:
//   - a quoted include first in the including file's directory on disk (the
//     spec's source and the headers it already carries have none), then in
//     the -iquote dirs, then in the angled search path;
//   - an angled include in -I, then -isystem, then -idirafter dirs, then
//     PackOptions::include_dirs;
//   - an include found nowhere is left alone (a toolchain header: <vector>,
//     <cuda_bf16.h>).
// Every header found is added to spec.headers under the name it is included
// by (NVRTC matches in-memory headers by that name; the cpp backend puts them
// in its virtual directory under it), and its own includes are followed. A
// header the spec already carries under a name is kept as is; its includes
// are followed too. Refused, with the include and the file that names it:
// two different files reachable under one name, an absolute or ".." include,
// a computed include, an unreadable file, and more than the limits.
//
// -include FILE / --pre-include=FILE is left in the options: kcached refuses
// it with its reason (write `#include "FILE"` in the source instead). Other
// options, and the llvm-ir and ptx backends, are left untouched.

#include <kcache/client/http_transport.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::client {

struct PackOptions {
  // Searched after the spec's own include dirs, for quoted and angled includes.
  std::vector<std::string> include_dirs;
  std::size_t max_total_bytes = std::size_t{64} << 20; // headers packed by this call
  std::size_t max_files = 10'000;
};

// The spec (CompileSpec JSON) with its headers packed and its include-dir
// options removed; every other field is kept as it was. Errors are kInvalid.
Result<std::string> pack_headers(std::string_view spec_json, const PackOptions& options = {});

} // namespace kcache::client
