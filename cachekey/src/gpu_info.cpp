#include <kcache/cachekey/hardware.h>

#include <dlfcn.h>

#include <memory>

namespace kcache::cachekey {
namespace {

// The few driver API entry points the fingerprint needs, resolved at run time
// so nothing here links against libcuda (the daemon runs on CPU-only hosts).
using CUresult = int;
using CUdevice = int;
constexpr CUresult kCudaSuccess = 0;
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;

struct DlClose {
  void operator()(void* handle) const { dlclose(handle); }
};

class CudaDriver {
public:
  CudaDriver() : lib_(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    if (!lib_) {
      return;
    }
    init_ = load<CUresult (*)(unsigned)>("cuInit");
    device_count_ = load<CUresult (*)(int*)>("cuDeviceGetCount");
    device_get_ = load<CUresult (*)(CUdevice*, int)>("cuDeviceGet");
    name_ = load<CUresult (*)(char*, int, CUdevice)>("cuDeviceGetName");
    attribute_ = load<CUresult (*)(int*, int, CUdevice)>("cuDeviceGetAttribute");
    total_mem_ = load<CUresult (*)(std::size_t*, CUdevice)>("cuDeviceTotalMem_v2");
  }

  bool usable() const {
    return init_ && device_count_ && device_get_ && name_ && attribute_ && total_mem_ &&
           init_(0) == kCudaSuccess;
  }

  std::vector<GpuInfo> devices() const {
    std::vector<GpuInfo> out;
    int count = 0;
    if (device_count_(&count) != kCudaSuccess) {
      return out;
    }
    for (int i = 0; i < count; ++i) {
      CUdevice dev = 0;
      if (device_get_(&dev, i) != kCudaSuccess) {
        continue;
      }
      GpuInfo gpu;
      gpu.ordinal = i;
      char name[256] = {};
      std::size_t mem = 0;
      if (name_(name, sizeof name, dev) != kCudaSuccess ||
          attribute_(&gpu.cc_major, kAttrComputeCapabilityMajor, dev) != kCudaSuccess ||
          attribute_(&gpu.cc_minor, kAttrComputeCapabilityMinor, dev) != kCudaSuccess ||
          attribute_(&gpu.sm_count, kAttrMultiprocessorCount, dev) != kCudaSuccess ||
          total_mem_(&mem, dev) != kCudaSuccess) {
        continue;
      }
      gpu.name = name;
      gpu.memory_bytes = mem;
      out.push_back(std::move(gpu));
    }
    return out;
  }

private:
  template <typename Fn> Fn load(const char* symbol) const {
    return reinterpret_cast<Fn>(dlsym(lib_.get(), symbol));
  }

  std::unique_ptr<void, DlClose> lib_;
  CUresult (*init_)(unsigned) = nullptr;
  CUresult (*device_count_)(int*) = nullptr;
  CUresult (*device_get_)(CUdevice*, int) = nullptr;
  CUresult (*name_)(char*, int, CUdevice) = nullptr;
  CUresult (*attribute_)(int*, int, CUdevice) = nullptr;
  CUresult (*total_mem_)(std::size_t*, CUdevice) = nullptr;
};

} // namespace

std::vector<GpuInfo> detect_gpus() {
  const CudaDriver driver;
  if (!driver.usable()) {
    return {};
  }
  return driver.devices();
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
