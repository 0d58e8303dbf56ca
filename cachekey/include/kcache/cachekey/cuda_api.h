#pragma once
// The CUDA driver API entry points kcache uses, resolved from libcuda.so.1
// with dlopen at run time. Nothing links libcuda, so every kcache program runs
// on hosts without a GPU (load() then says why). This is the one dlopen shim:
// cachekey lists devices for the hardware fingerprint through it, and
// compiler's CudaDriver loads, launches and times CUBINs through it.

#include <tl/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace kcache::cachekey {

class CudaApi {
public:
  using Result = int; // CUresult
  using Device = int; // CUdevice
  using Context = void*;
  using Handle = void*; // CUmodule, CUfunction, CUevent
  using DevicePtr = std::uint64_t;
  static constexpr Result kSuccess = 0;

  // Loads libcuda.so.1, resolves every entry point below and calls cuInit(0).
  static tl::expected<std::unique_ptr<const CudaApi>, std::string> load();

  // "what: CUDA error N (the driver's text for N)".
  std::string error(Result result, std::string_view what) const;

  // Attribute numbers from cuda.h (CUdevice_attribute, CUfunction_attribute).
  static constexpr int kAttrMaxSharedPerBlock = 8;
  static constexpr int kAttrMaxSharedPerBlockOptin = 97;
  static constexpr int kAttrMultiprocessorCount = 16;
  static constexpr int kAttrComputeCapabilityMajor = 75;
  static constexpr int kAttrComputeCapabilityMinor = 76;
  static constexpr int kFuncMaxThreadsPerBlock = 0;
  static constexpr int kFuncSharedSizeBytes = 1;
  static constexpr int kFuncNumRegs = 4;
  static constexpr int kFuncMaxDynamicSharedSizeBytes = 8;

  // The _v2 symbols are the ones cuda.h maps the plain names to.
  Result (*cuInit)(unsigned) = nullptr;
  Result (*cuDeviceGetCount)(int*) = nullptr;
  Result (*cuDeviceGet)(Device*, int) = nullptr;
  Result (*cuDeviceGetName)(char*, int, Device) = nullptr;
  Result (*cuDeviceGetAttribute)(int*, int, Device) = nullptr;
  Result (*cuDeviceTotalMem)(std::size_t*, Device) = nullptr;
  Result (*cuDevicePrimaryCtxRetain)(Context*, Device) = nullptr;
  Result (*cuDevicePrimaryCtxRelease)(Device) = nullptr;
  Result (*cuCtxSetCurrent)(Context) = nullptr;
  Result (*cuCtxSynchronize)() = nullptr;
  Result (*cuModuleLoadData)(Handle*, const void*) = nullptr;
  Result (*cuModuleUnload)(Handle) = nullptr;
  Result (*cuModuleGetFunction)(Handle*, Handle, const char*) = nullptr;
  Result (*cuFuncGetAttribute)(int*, int, Handle) = nullptr;
  Result (*cuFuncSetAttribute)(Handle, int, int) = nullptr;
  Result (*cuMemAlloc)(DevicePtr*, std::size_t) = nullptr;
  Result (*cuMemFree)(DevicePtr) = nullptr;
  Result (*cuMemcpyHtoD)(DevicePtr, const void*, std::size_t) = nullptr;
  Result (*cuMemcpyDtoH)(void*, DevicePtr, std::size_t) = nullptr;
  Result (*cuMemsetD8)(DevicePtr, unsigned char, std::size_t) = nullptr;
  Result (*cuLaunchKernel)(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, void*, void**, void**) = nullptr;
  Result (*cuEventCreate)(Handle*, unsigned) = nullptr;
  Result (*cuEventRecord)(Handle, Handle) = nullptr;
  Result (*cuEventSynchronize)(Handle) = nullptr;
  Result (*cuEventElapsedTime)(float*, Handle, Handle) = nullptr;
  Result (*cuEventDestroy)(Handle) = nullptr;
  Result (*cuGetErrorString)(Result, const char**) = nullptr;

private:
  struct DlClose {
    void operator()(void* handle) const;
  };
  std::unique_ptr<void, DlClose> library_;
};

} // namespace kcache::cachekey
