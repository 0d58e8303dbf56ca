#pragma once
// Hardware fingerprints. A *binary class* says whether a binary can run
// ("cuda:sm_90a", "x86_64:avx512") and keys compiled artifacts; a *tuning class*
// says which variant is fastest (device model, SM count, memory) and keys
// autotune records. CPUs are read with cpuid; NVIDIA GPUs through the CUDA
// driver API, loaded with dlopen at run time: no driver means no GPUs, never an
// error.

#include <cstdint>
#include <string>
#include <vector>

namespace kcache::cachekey {

struct CpuInfo {
  std::string arch;                  // "x86_64", "aarch64"
  std::string isa_level;             // "avx512", "avx2", "sse4.2", "baseline"
  std::vector<std::string> features; // sorted: "avx2", "avx512f", "fma", "sha"...
  std::string vendor;                // "GenuineIntel", "AuthenticAMD"
  std::string model;                 // brand string, trimmed
  unsigned logical_cores = 0;
};

struct GpuInfo {
  int ordinal = 0;
  std::string name; // "NVIDIA H100 80GB HBM3"
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  std::uint64_t memory_bytes = 0;
};

struct HardwareClass {
  std::string binary_class;
  std::string tuning_class;
  friend bool operator==(const HardwareClass&, const HardwareClass&) = default;
};

CpuInfo detect_cpu();
// Empty when libcuda is absent, cuInit fails, or there is no device.
std::vector<GpuInfo> detect_gpus();

HardwareClass hardware_class(const CpuInfo& cpu);
HardwareClass hardware_class(const GpuInfo& gpu);

// "sm_90a" for arch-specific targets (Hopper and newer), "sm_86" before them.
std::string cuda_arch_name(int cc_major, int cc_minor);

} // namespace kcache::cachekey
