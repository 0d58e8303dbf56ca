#pragma once
// Byte sizes as people write them ("64KiB", "10GiB", "512MB", "1000") and read them.

#include <tl/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace kcache::protocol {

tl::expected<std::uint64_t, std::string> parse_size(std::string_view text);
// "1.5 MiB", "812 B".
std::string format_size(std::uint64_t bytes);

// Ages as ccache's --evict-older-than takes them: a number with a unit of
// s, m, h or d ("7d", "12h", "90s"); a bare number is seconds. At most
// 2^32 seconds (136 years): more is an error, not a wrap.
tl::expected<std::uint64_t, std::string> parse_duration_s(std::string_view text);

} // namespace kcache::protocol
