#include <kcache/cachekey/hardware.h>

#include <algorithm>
#include <cstring>
#include <thread>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace kcache::cachekey {
namespace {

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t\0");
  if (first == std::string::npos) {
    return {};
  }
  s.erase(0, first);
  s.erase(s.find_last_not_of(std::string(" \t\0", 3)) + 1);
  return s;
}

#if defined(__x86_64__)
struct Regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf = 0) {
  Regs r;
  if (__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) == 0) {
    return Regs{};
  }
  return r;
}

bool bit(unsigned reg, int n) {
  return ((reg >> n) & 1U) != 0;
}

// XCR0 says which register state the OS saves; AVX/AVX-512 are usable only
// when it does.
std::uint64_t xgetbv0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

void read_x86(CpuInfo& info) {
  const Regs v0 = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor, &v0.ebx, 4);
  std::memcpy(vendor + 4, &v0.edx, 4);
  std::memcpy(vendor + 8, &v0.ecx, 4);
  info.vendor = vendor;

  if (cpuid(0x80000000).eax >= 0x80000004) {
    char brand[49] = {};
    for (std::size_t i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002 + static_cast<unsigned>(i));
      std::memcpy(brand + 16 * i, &r, 16);
    }
    info.model = trim(brand);
  }

  const Regs l1 = cpuid(1);
  const Regs l7 = v0.eax >= 7 ? cpuid(7, 0) : Regs{};
  const Regs l7s1 = v0.eax >= 7 ? cpuid(7, 1) : Regs{};
  const bool osxsave = bit(l1.ecx, 27);
  const std::uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (xcr0 & 0xE0) == 0xE0;
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;

  auto& f = info.features;
  auto add = [&f](bool present, const char* name) {
    if (present) {
      f.emplace_back(name);
    }
  };
  add(bit(l1.ecx, 0), "sse3");
  add(bit(l1.ecx, 9), "ssse3");
  add(bit(l1.ecx, 19), "sse4.1");
  add(bit(l1.ecx, 20), "sse4.2");
  add(bit(l1.ecx, 23), "popcnt");
  add(bit(l1.ecx, 22), "movbe");
  add(bit(l1.ecx, 29), "f16c");
  add(os_avx && bit(l1.ecx, 28), "avx");
  add(os_avx && bit(l1.ecx, 12), "fma");
  add(os_avx && bit(l7.ebx, 5), "avx2");
  add(bit(l7.ebx, 3), "bmi1");
  add(bit(l7.ebx, 8), "bmi2");
  add(bit(l7.ebx, 29), "sha");
  add(bit(cpuid(0x80000001).ecx, 5), "lzcnt");
  add(os_avx512 && bit(l7.ebx, 16), "avx512f");
  add(os_avx512 && bit(l7.ebx, 17), "avx512dq");
  add(os_avx512 && bit(l7.ebx, 28), "avx512cd");
  add(os_avx512 && bit(l7.ebx, 30), "avx512bw");
  add(os_avx512 && bit(l7.ebx, 31), "avx512vl");
  add(os_avx512 && bit(l7.ecx, 11), "avx512vnni");
  add(os_avx512 && bit(l7.edx, 23), "avx512fp16");
  add(os_avx512 && bit(l7s1.eax, 5), "avx512bf16");
  add(os_amx && bit(l7.edx, 24), "amx-tile");
  add(os_amx && bit(l7.edx, 22), "amx-bf16");
  std::sort(f.begin(), f.end());

  auto has = [&f](std::initializer_list<const char*> names) {
    return std::all_of(names.begin(), names.end(), [&f](const char* n) {
      return std::binary_search(f.begin(), f.end(), std::string(n));
    });
  };
  // The x86-64 micro-architecture levels (v4, v3, v2), named by their headline ISA.
  if (has({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", "avx2", "fma", "bmi2"})) {
    info.isa_level = "avx512";
  } else if (has({"avx2", "avx", "fma", "bmi1", "bmi2", "movbe", "lzcnt", "f16c"})) {
    info.isa_level = "avx2";
  } else if (has({"sse4.2", "sse4.1", "ssse3", "popcnt"})) {
    info.isa_level = "sse4.2";
  } else {
    info.isa_level = "baseline";
  }
}
#endif

} // namespace

CpuInfo detect_cpu() {
  CpuInfo info;
  info.logical_cores = std::max(1U, std::thread::hardware_concurrency());
#if defined(__x86_64__)
  info.arch = "x86_64";
  read_x86(info);
#elif defined(__aarch64__)
  info.arch = "aarch64";
  info.isa_level = "baseline";
#else
  info.arch = "unknown";
  info.isa_level = "baseline";
#endif
  if (info.model.empty()) {
    info.model = info.arch;
  }
  return info;
}

HardwareClass hardware_class(const CpuInfo& cpu) {
  return HardwareClass{cpu.arch + ":" + cpu.isa_level,
                       cpu.arch + ":" + cpu.model + ":" + std::to_string(cpu.logical_cores) + "t"};
}

} // namespace kcache::cachekey
