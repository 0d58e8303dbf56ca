#include "entry_points.h"

#include <kcache/compiler/cubin.h>

#include <string>

namespace kcache::compiler {
namespace {

// A PTX `.entry` directive (".visible .entry name(", ".entry name"), outside
// comments.
bool ptx_has_entry(std::string_view ptx) {
  while (!ptx.empty()) {
    const std::size_t end = ptx.find('\n');
    std::string_view line = ptx.substr(0, end);
    line = line.substr(0, line.find("//"));
    for (std::size_t at = line.find(".entry"); at != std::string_view::npos;
         at = line.find(".entry", at + 1)) {
      const std::size_t next = at + 6;
      if ((at == 0 || line[at - 1] == ' ' || line[at - 1] == '\t') && next < line.size() &&
          (line[next] == ' ' || line[next] == '\t')) {
        return true;
      }
    }
    if (end == std::string_view::npos) {
      break;
    }
    ptx.remove_prefix(end + 1);
  }
  return false;
}

} // namespace

CompileError no_entry_points(std::string_view what) {
  return CompileError{CompileError::Code::kCompileFailed,
                      "no entry points: " + std::string(what) +
                          " (an empty source, or every function static or inline?)",
                      {}};
}

std::optional<CompileError> check_entry_points(OutputKind kind, std::string_view binary) {
  if (kind == OutputKind::kCubin) {
    const auto info = inspect_cubin(binary);
    if (info && info->kernels.empty()) {
      return no_entry_points("the CUBIN has no kernel (__global__ function)");
    }
  } else if (kind == OutputKind::kPtx && !ptx_has_entry(binary)) {
    return no_entry_points("the PTX has no .entry (kernel)");
  }
  return std::nullopt;
}

} // namespace kcache::compiler
