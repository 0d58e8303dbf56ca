#pragma once
// Compiler logs as the service shows them. Every backend's log leaves the
// worker through here: valid UTF-8 with no NUL bytes (logs go into JSON and
// terminals), and a failed compile's message names the compiler's first
// diagnostic so that a job listing says what is wrong without the log.

#include <kcache/compiler/backend.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace kcache::compiler {

// Invalid UTF-8 sequences become U+FFFD; NUL bytes are dropped.
std::string clean_log(std::string_view log);

// The first error line of a log, trimmed, or "" if it has none:
//   NVRTC        "kernel.cu(2): error: identifier \"x\" is undefined"
//   clang/LLVM   "kernel.cpp:2:10: error: use of undeclared identifier 'x'"
//   ptxas        "ptxas fatal   : Unresolved extern function 'f'"
std::string first_diagnostic(std::string_view log);

// At most `max_bytes` from the end of `text`, cut at a line or UTF-8
// character boundary, with "...\n" in front when something was cut.
std::string log_tail(std::string_view text, std::size_t max_bytes);

// Cleans the log and message and puts the log's first diagnostic in front of
// the message: "k.cu(2): error: ... (NVRTC compile failed: NVRTC_ERROR_...)".
// Not for resource limits, whose message is the runner's. Idempotent: the
// worker applies it to every backend's error, the runner again.
CompileError tidy_error(CompileError error);

// Whether a process's stderr says an allocation failed (ptxas "Memory
// allocation failure", "LLVM ERROR: out of memory", std::bad_alloc, ...);
// returns that line, or "" if none.
std::string out_of_memory_line(std::string_view text);

} // namespace kcache::compiler
