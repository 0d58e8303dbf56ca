#pragma once
// Single-flight leases for producers outside the service (a PyTorch rank that
// compiles itself): the first to ask gets the lease and compiles; the others
// wait in get(key, wait) for its put. A dead holder's lease expires.

#include <chrono>
#include <string>

namespace kcache::client {

struct Lease {
  bool granted = false;
  bool cached = false; // the key is stored already: nothing to produce
  std::string token;   // for renew and release, when granted
  std::string holder;  // who holds it
  std::chrono::milliseconds expires_in{0};
};

} // namespace kcache::client
