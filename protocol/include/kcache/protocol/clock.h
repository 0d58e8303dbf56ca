#pragma once
// The wall clock kcache writes into records, jobs and listings.

#include <cstdint>

namespace kcache::protocol {

// Milliseconds since the Unix epoch (system_clock: comparable across
// processes and hosts, unlike a steady clock, and so not for timeouts).
std::int64_t unix_now_ms();

} // namespace kcache::protocol
