#pragma once
// A lease answer as the wire shows it (POST /v1/leases/{key}): kcached
// renders it with to_json, clients read it with lease_from_json.
//
// Single-flight for producers outside the service (a PyTorch rank that
// compiles itself): the first to ask gets the lease and compiles; the others
// wait in get(key, wait) for its put. A dead holder's lease expires.

#include <nlohmann/json_fwd.hpp>
#include <tl/expected.hpp>

#include <chrono>
#include <string>

namespace kcache::protocol {

struct Lease {
  bool granted = false;
  bool cached = false; // the key is stored already: nothing to produce
  std::string token;   // for renew and release, when granted
  std::string holder;  // who holds it
  std::chrono::milliseconds expires_in{0};
};

// A cached answer carries only granted and cached; the token only when granted.
nlohmann::json to_json(const Lease& lease);
tl::expected<Lease, std::string> lease_from_json(const nlohmann::json& doc);

} // namespace kcache::protocol
