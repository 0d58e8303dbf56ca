#include <kcache/compiler/cubin.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <utility>

namespace kcache::compiler {

namespace {

constexpr std::uint16_t kEmCuda = 190;
constexpr std::uint32_t kShtSymtab = 2;
constexpr unsigned char kSttFunc = 2;
constexpr unsigned char kStbLocal = 0;
constexpr unsigned char kStoCudaEntry = 0x10; // st_other bit of a __global__ function
constexpr std::size_t kSectionHeaderSize = 64;
constexpr std::size_t kSymbolSize = 24;

template <typename T> T read_at(std::string_view bytes, std::size_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

// `size` bytes at `offset` lie within `bytes`.
bool within(std::string_view bytes, std::uint64_t offset, std::uint64_t size) {
  return offset <= bytes.size() && size <= bytes.size() - offset;
}

// The kernels in the symbol tables; nullopt if a table points outside the file.
std::optional<std::vector<std::string>> kernel_names(std::string_view bytes) {
  const auto shoff = read_at<std::uint64_t>(bytes, 40);
  const auto shentsize = read_at<std::uint16_t>(bytes, 58);
  const auto shnum = read_at<std::uint16_t>(bytes, 60);
  std::vector<std::string> kernels;
  if (shnum == 0) {
    return kernels;
  }
  if (shentsize < kSectionHeaderSize ||
      !within(bytes, shoff, static_cast<std::uint64_t>(shnum) * shentsize)) {
    return std::nullopt;
  }
  auto section = [&](std::size_t i) { return shoff + i * shentsize; };
  for (std::size_t i = 0; i < shnum; ++i) {
    const std::uint64_t sh = section(i);
    if (read_at<std::uint32_t>(bytes, sh + 4) != kShtSymtab) {
      continue;
    }
    const auto offset = read_at<std::uint64_t>(bytes, sh + 24);
    const auto size = read_at<std::uint64_t>(bytes, sh + 32);
    const auto link = read_at<std::uint32_t>(bytes, sh + 40);
    if (!within(bytes, offset, size) || link >= shnum) {
      return std::nullopt;
    }
    const auto str_offset = read_at<std::uint64_t>(bytes, section(link) + 24);
    const auto str_size = read_at<std::uint64_t>(bytes, section(link) + 32);
    if (!within(bytes, str_offset, str_size)) {
      return std::nullopt;
    }
    const std::string_view strings = bytes.substr(str_offset, str_size);
    for (std::uint64_t sym = offset; sym + kSymbolSize <= offset + size; sym += kSymbolSize) {
      const auto name = read_at<std::uint32_t>(bytes, sym);
      const auto info = static_cast<unsigned char>(bytes[sym + 4]);
      const auto other = static_cast<unsigned char>(bytes[sym + 5]);
      if ((info & 0xF) != kSttFunc || (info >> 4) == kStbLocal || (other & kStoCudaEntry) == 0 ||
          name >= strings.size()) {
        continue;
      }
      const std::string_view rest = strings.substr(name);
      kernels.emplace_back(rest.substr(0, rest.find('\0')));
    }
  }
  return kernels;
}

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
  auto kernels = kernel_names(bytes);
  if (!kernels) {
    return std::nullopt;
  }
  info.kernels = std::move(*kernels);
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
