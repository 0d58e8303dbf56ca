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

} // namespace kcache::protocol
