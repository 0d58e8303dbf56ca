// kcache nodes: the kcached nodes of a cluster (cluster mode), as each last
// heartbeated into Redis.

#include "cli.h"
#include "table.h"

#include <kcache/protocol/admin.h>

#include <iostream>

namespace kcache::cli {

int cmd_nodes(Cli& cli) {
  auto list = cli.client->nodes();
  if (!list) {
    return fail_call(list.error());
  }
  if (cli.json_output) {
    std::cout << protocol::json_text(protocol::to_json(*list), 2) << "\n";
    return kOk;
  }
  Table t;
  t.column("NODE");
  t.column("ADDRESS");
  t.column("VERSION");
  t.column("CAPABILITIES");
  t.column("WORKERS", Table::Align::kRight);
  t.column("QUEUED", Table::Align::kRight);
  t.column("RUNNING", Table::Align::kRight);
  t.column("UP", Table::Align::kRight);
  t.column("HEARTBEAT", Table::Align::kRight);
  const std::int64_t now = unix_now_ms();
  for (const protocol::NodeView& n : list->nodes) {
    std::string capabilities;
    for (const std::string& c : n.capabilities) {
      capabilities += (capabilities.empty() ? "" : ",") + c;
    }
    t.row({n.id, n.address, n.version, capabilities.empty() ? "-" : capabilities,
           std::to_string(n.workers), std::to_string(n.queued), std::to_string(n.running),
           format_age(n.started_ms, now), format_age(n.heartbeat_ms, now)});
  }
  std::cout << t.render();
  std::printf("%zu node%s\n", list->nodes.size(), list->nodes.size() == 1 ? "" : "s");
  return kOk;
}

} // namespace kcache::cli
