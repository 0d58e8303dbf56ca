#pragma once
// Single-flight leases for producers outside the service (a PyTorch rank that
// compiles itself): the first to ask gets the lease and compiles; the others
// wait in get(key, wait) for its put. A dead holder's lease expires.

#include <kcache/protocol/lease.h>

namespace kcache::client {

// granted, cached, token, holder, expires_in: the daemon's answer as read by
// the same code that renders it.
using Lease = protocol::Lease;

} // namespace kcache::client
