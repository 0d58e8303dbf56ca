// libFuzzer target: arbitrary bytes through the RESP request parser (with
// small limits, so the length checks are reached) and every command it yields
// through RespCommands over a memory store, as a RESP connection would. A
// crash, a sanitizer report or a broken invariant is a bug; the checks below
// are what the connection (resp_server.cpp) relies on.

#include "resp_commands.h"
#include "resp_parser.h"

#include <kcache/storage/memory_store.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

struct Fixture {
  kcache::storage::MemoryStore store{16 << 20};
  kcache::service::MetricsRegistry metrics;
  kcache::service::RespCommands commands{store, nullptr, {}, "fuzz", 64 << 10, metrics};
};

void check(bool ok) {
  if (!ok) {
    std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture fixture; // one store across inputs: a GET may find an earlier SET
  const kcache::service::RespLimits limits{.max_bulk_bytes = 64 << 10,
                                           .max_args = 64,
                                           .max_line_bytes = 64,
                                           .max_request_bytes = 80 << 10};
  kcache::service::RespParser parser(limits);
  kcache::service::RespSession session = fixture.commands.open();
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args;
  std::string out;
  while (!session.quit) {
    std::size_t consumed = 0;
    const auto status = parser.parse(in, args, consumed);
    if (status == kcache::service::RespParser::Status::kNeedMore) {
      check(consumed == 0 && args.empty());
      // More bytes are awaited only up to what the limits allow.
      check(parser.declared_bytes() <= limits.max_request_bytes);
      break;
    }
    if (status == kcache::service::RespParser::Status::kError) {
      check(!parser.error().empty());
      fixture.commands.protocol_error(parser.error(), out);
      break;
    }
    check(consumed > 0 && consumed <= in.size());
    check(!args.empty() && args.size() <= limits.max_args);
    // A prefix of a complete command is never a command of its own size.
    std::vector<std::string> prefix_args;
    std::size_t prefix_consumed = 0;
    check(parser.parse(in.substr(0, consumed - 1), prefix_args, prefix_consumed) !=
          kcache::service::RespParser::Status::kCommand);
    out.clear();
    fixture.commands.execute(args, session, out);
    check(!out.empty() && out.ends_with("\r\n"));
    in.remove_prefix(consumed);
  }
  return 0;
}
