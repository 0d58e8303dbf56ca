#include <kcache/compiler/cubin.h>

#include <charconv>
#include <cstdint>
#include <cstring>

namespace kcache::compiler {

namespace {
constexpr std::uint16_t kEmCuda = 190;
} // namespace

std::optional<CubinInfo> inspect_cubin(std::string_view bytes) {
  if (bytes.size() < 64 ||
      std::memcmp(bytes.data(),
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      bytes[4] != 2) {
    return std::nullopt;
  }
  std::uint16_t machine = 0;
  std::uint32_t flags = 0;
  std::memcpy(&machine, bytes.data() + 18, sizeof machine);
  std::memcpy(&flags, bytes.data() + 48, sizeof flags);
  if (machine != kEmCuda) {
    return std::nullopt;
  }
  CubinInfo info;
  info.elf_abi_version = static_cast<unsigned char>(bytes[8]);
  // ABI version 8 (CUDA 12.8+) keeps the SM in bits 8-15; older ones in bits 0-7.
  info.sm = info.elf_abi_version >= 8 ? static_cast<int>((flags >> 8) & 0xFF)
                                      : static_cast<int>(flags & 0xFF);
  return info;
}

std::optional<int> sm_of_target(std::string_view target) {
  for (std::string_view prefix : {"sm_", "compute_"}) {
    if (target.starts_with(prefix)) {
      target.remove_prefix(prefix.size());
      int sm = 0;
      const auto [ptr, ec] = std::from_chars(target.data(), target.data() + target.size(), sm);
      if (ec == std::errc() && ptr != target.data()) {
        return sm;
      }
    }
  }
  return std::nullopt;
}

} // namespace kcache::compiler
