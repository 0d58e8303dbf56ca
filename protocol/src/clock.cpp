#include <kcache/protocol/clock.h>

#include <chrono>

namespace kcache::protocol {

std::int64_t unix_now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

} // namespace kcache::protocol
