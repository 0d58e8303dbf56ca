#pragma once
// What a hit's answer copies (issue 21): the payload bytes hits served (the
// stored values handed out: an artifact's files, a RESP GET's value) and how
// many of those bytes kcached copied on their way to the socket. The memory
// tier hands its values out shared (storage/store.h, SharedBytes), so these
// copies are the service's own: a value encoded into a body or a reply
// string. The kernel's copy into the socket is not counted.

#include <kcache/service/metrics.h>

#include <string>

namespace kcache::service {

class HitCopies {
public:
  HitCopies(MetricsRegistry& metrics, const std::string& protocol)
      : payload_(metrics.counter("kcache_hit_payload_bytes_total",
                                 "Bytes of stored values (artifact files, RESP values) served by "
                                 "hits",
                                 {{"protocol", protocol}})),
        copied_(metrics.counter("kcache_hit_bytes_copied_total",
                                "Bytes of hits' stored values copied in kcached on their way to "
                                "the socket (memory-tier values are handed out uncopied)",
                                {{"protocol", protocol}})) {}

  // One hit: `payload` bytes of values, `copied` of them copied.
  void count(std::uint64_t payload, std::uint64_t copied) {
    payload_.inc(payload);
    copied_.inc(copied);
  }

private:
  Counter& payload_;
  Counter& copied_;
};

} // namespace kcache::service
