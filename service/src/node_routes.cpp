// GET /v1/nodes: the cluster's live nodes (node_registry.h), as /v1/stats
// and /metrics, for any token that may read.

#include "responses.h"

#include <kcache/service/node_registry.h>
#include <kcache/service/request_handler.h>

namespace kcache::service {

Response RequestHandler::nodes(const Request& req, const RouteArgs& /*args*/) {
  if (nodes_ == nullptr) {
    return error(req, http::status::not_found,
                 "this kcached is not in cluster mode (start it with --cluster and --redis-url)");
  }
  auto live = nodes_->list();
  if (!live) {
    return error(req, http::status::service_unavailable,
                 "cannot list the cluster's nodes: " + live.error());
  }
  return json_response(req, http::status::ok, protocol::to_json(protocol::NodeList{*live}));
}

} // namespace kcache::service
