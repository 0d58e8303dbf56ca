#include <kcache/cachekey/cuda_api.h>
#include <kcache/cachekey/hardware.h>

namespace kcache::cachekey {

std::vector<GpuInfo> detect_gpus() {
  auto loaded = CudaApi::load();
  if (!loaded) {
    return {}; // no driver or no usable GPU: a CPU-only host
  }
  const CudaApi& cuda = **loaded;
  std::vector<GpuInfo> out;
  int count = 0;
  if (cuda.cuDeviceGetCount(&count) != CudaApi::kSuccess) {
    return out;
  }
  for (int i = 0; i < count; ++i) {
    CudaApi::Device dev = 0;
    if (cuda.cuDeviceGet(&dev, i) != CudaApi::kSuccess) {
      continue;
    }
    GpuInfo gpu;
    gpu.ordinal = i;
    char name[256] = {};
    std::size_t mem = 0;
    if (cuda.cuDeviceGetName(name, sizeof name, dev) != CudaApi::kSuccess ||
        cuda.cuDeviceGetAttribute(&gpu.cc_major, CudaApi::kAttrComputeCapabilityMajor, dev) !=
            CudaApi::kSuccess ||
        cuda.cuDeviceGetAttribute(&gpu.cc_minor, CudaApi::kAttrComputeCapabilityMinor, dev) !=
            CudaApi::kSuccess ||
        cuda.cuDeviceGetAttribute(&gpu.sm_count, CudaApi::kAttrMultiprocessorCount, dev) !=
            CudaApi::kSuccess ||
        cuda.cuDeviceTotalMem(&mem, dev) != CudaApi::kSuccess) {
      continue;
    }
    gpu.name = name;
    gpu.memory_bytes = mem;
    out.push_back(std::move(gpu));
  }
  return out;
}

std::string cuda_arch_name(int cc_major, int cc_minor) {
  // Arch-specific ("a") features exist from Hopper on; binaries built for them
  // run only on that exact compute capability, which is what a binary class means.
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor) + (cc_major >= 9 ? "a" : "");
}

HardwareClass hardware_class(const GpuInfo& gpu) {
  const std::uint64_t gib = (gpu.memory_bytes + (1ULL << 29)) >> 30;
  return HardwareClass{"cuda:" + cuda_arch_name(gpu.cc_major, gpu.cc_minor),
                       "cuda:" + gpu.name + ":" + std::to_string(gpu.sm_count) +
                           "sm:" + std::to_string(gib) + "GiB"};
}

} // namespace kcache::cachekey
