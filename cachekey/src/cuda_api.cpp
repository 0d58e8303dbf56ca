#include <kcache/cachekey/cuda_api.h>

#include <dlfcn.h>

#include <type_traits>

namespace kcache::cachekey {

void CudaApi::DlClose::operator()(void* handle) const {
  dlclose(handle);
}

tl::expected<std::unique_ptr<const CudaApi>, std::string> CudaApi::load() {
  auto api = std::make_unique<CudaApi>();
  api->library_.reset(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!api->library_) {
    return tl::unexpected(std::string("no CUDA driver on this host (libcuda.so.1: ") + dlerror() +
                          ")");
  }
  void* library = api->library_.get();
  std::string missing;
  auto resolve = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, symbol));
    if (fn == nullptr && missing.empty()) {
      missing = symbol;
    }
  };
  resolve(api->cuInit, "cuInit");
  resolve(api->cuDeviceGetCount, "cuDeviceGetCount");
  resolve(api->cuDeviceGet, "cuDeviceGet");
  resolve(api->cuDeviceGetName, "cuDeviceGetName");
  resolve(api->cuDeviceGetAttribute, "cuDeviceGetAttribute");
  resolve(api->cuDeviceTotalMem, "cuDeviceTotalMem_v2");
  resolve(api->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  resolve(api->cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  resolve(api->cuCtxSetCurrent, "cuCtxSetCurrent");
  resolve(api->cuCtxSynchronize, "cuCtxSynchronize");
  resolve(api->cuModuleLoadData, "cuModuleLoadData");
  resolve(api->cuModuleUnload, "cuModuleUnload");
  resolve(api->cuModuleGetFunction, "cuModuleGetFunction");
  resolve(api->cuFuncGetAttribute, "cuFuncGetAttribute");
  resolve(api->cuFuncSetAttribute, "cuFuncSetAttribute");
  resolve(api->cuMemAlloc, "cuMemAlloc_v2");
  resolve(api->cuMemFree, "cuMemFree_v2");
  resolve(api->cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  resolve(api->cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  resolve(api->cuMemsetD8, "cuMemsetD8_v2");
  resolve(api->cuLaunchKernel, "cuLaunchKernel");
  resolve(api->cuEventCreate, "cuEventCreate");
  resolve(api->cuEventRecord, "cuEventRecord");
  resolve(api->cuEventSynchronize, "cuEventSynchronize");
  resolve(api->cuEventElapsedTime, "cuEventElapsedTime");
  resolve(api->cuEventDestroy, "cuEventDestroy_v2");
  resolve(api->cuGetErrorString, "cuGetErrorString");
  if (!missing.empty()) {
    return tl::unexpected("libcuda.so.1 lacks " + missing + ", an entry point kcache needs");
  }
  if (Result r = api->cuInit(0); r != kSuccess) {
    return tl::unexpected(api->error(r, "cuInit"));
  }
  return api;
}

std::string CudaApi::error(Result result, std::string_view what) const {
  const char* text = nullptr;
  if (cuGetErrorString != nullptr) {
    cuGetErrorString(result, &text);
  }
  return std::string(what) + ": CUDA error " + std::to_string(result) +
         (text != nullptr ? std::string(" (") + text + ")" : "");
}

} // namespace kcache::cachekey
