#include <kcache/cachekey/cuda_api.h>
#include <kcache/compiler/cuda_driver.h>

namespace kcache::compiler {

using cachekey::CudaApi;
using CUresult = CudaApi::Result;
constexpr CUresult kSuccess = CudaApi::kSuccess;

// The driver's entry points and the context this CudaDriver made current.
struct CudaDriver::Api {
  std::unique_ptr<const CudaApi> cuda;
  CudaApi::Context context = nullptr;
  CudaApi::Device device = 0;

  std::string error(CUresult r, const std::string& what) const { return cuda->error(r, what); }
};

tl::expected<std::unique_ptr<CudaDriver>, std::string> CudaDriver::open(int ordinal) {
  auto cuda = CudaApi::load();
  if (!cuda) {
    return tl::unexpected(cuda.error());
  }
  auto api = std::make_unique<Api>();
  api->cuda = std::move(*cuda);
  const CudaApi& c = *api->cuda;
  if (CUresult r = c.cuDeviceGet(&api->device, ordinal); r != kSuccess) {
    return tl::unexpected(api->error(r, "cuDeviceGet(" + std::to_string(ordinal) + ")"));
  }
  DeviceInfo info;
  char name[256] = {};
  c.cuDeviceGetName(name, sizeof name, api->device);
  info.name = name;
  c.cuDeviceGetAttribute(&info.cc_major, CudaApi::kAttrComputeCapabilityMajor, api->device);
  c.cuDeviceGetAttribute(&info.cc_minor, CudaApi::kAttrComputeCapabilityMinor, api->device);
  if (CUresult r = c.cuDevicePrimaryCtxRetain(&api->context, api->device); r != kSuccess) {
    return tl::unexpected(api->error(r, "cuDevicePrimaryCtxRetain"));
  }
  if (CUresult r = c.cuCtxSetCurrent(api->context); r != kSuccess) {
    c.cuDevicePrimaryCtxRelease(api->device);
    return tl::unexpected(api->error(r, "cuCtxSetCurrent"));
  }
  return std::make_unique<CudaDriver>(std::move(api), std::move(info));
}

CudaDriver::CudaDriver(std::unique_ptr<Api> api, DeviceInfo device)
    : api_(std::move(api)), device_(std::move(device)) {}

CudaDriver::~CudaDriver() {
  for (Handle m : modules_) {
    api_->cuda->cuModuleUnload(m);
  }
  api_->cuda->cuDevicePrimaryCtxRelease(api_->device);
}

tl::expected<CudaDriver::Handle, std::string> CudaDriver::load_module(const std::string& cubin) {
  Handle module = nullptr;
  if (CUresult r = api_->cuda->cuModuleLoadData(&module, cubin.data()); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuModuleLoadData"));
  }
  modules_.push_back(module);
  return module;
}

tl::expected<CudaDriver::Handle, std::string> CudaDriver::function(Handle module,
                                                                   const std::string& name) {
  Handle fn = nullptr;
  if (CUresult r = api_->cuda->cuModuleGetFunction(&fn, module, name.c_str()); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuModuleGetFunction(" + name + ")"));
  }
  return fn;
}

tl::expected<CudaDriver::DevicePtr, std::string> CudaDriver::alloc(std::size_t bytes) {
  DevicePtr ptr = 0;
  if (CUresult r = api_->cuda->cuMemAlloc(&ptr, bytes); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuMemAlloc"));
  }
  return ptr;
}

void CudaDriver::free(DevicePtr ptr) {
  api_->cuda->cuMemFree(ptr);
}

tl::expected<void, std::string> CudaDriver::copy_to_device(DevicePtr dst, const void* src,
                                                           std::size_t bytes) {
  if (CUresult r = api_->cuda->cuMemcpyHtoD(dst, src, bytes); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuMemcpyHtoD"));
  }
  return {};
}

tl::expected<void, std::string> CudaDriver::copy_to_host(void* dst, DevicePtr src,
                                                         std::size_t bytes) {
  if (CUresult r = api_->cuda->cuMemcpyDtoH(dst, src, bytes); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuMemcpyDtoH"));
  }
  return {};
}

tl::expected<void, std::string> CudaDriver::launch(Handle function, unsigned grid_x,
                                                   unsigned block_x, unsigned shared_bytes,
                                                   std::vector<void*> args) {
  if (CUresult r = api_->cuda->cuLaunchKernel(function, grid_x, 1, 1, block_x, 1, 1, shared_bytes,
                                              nullptr, args.data(), nullptr);
      r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuLaunchKernel"));
  }
  return {};
}

tl::expected<void, std::string> CudaDriver::synchronize() {
  if (CUresult r = api_->cuda->cuCtxSynchronize(); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuCtxSynchronize"));
  }
  return {};
}

tl::expected<void, std::string> CudaDriver::zero(DevicePtr ptr, std::size_t bytes) {
  if (CUresult r = api_->cuda->cuMemsetD8(ptr, 0, bytes); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuMemsetD8"));
  }
  return {};
}

tl::expected<CudaDriver::FunctionLimits, std::string> CudaDriver::limits(Handle function) {
  FunctionLimits l;
  for (auto [attribute, out] :
       {std::pair{CudaApi::kFuncMaxThreadsPerBlock, &l.max_threads_per_block},
        std::pair{CudaApi::kFuncNumRegs, &l.registers},
        std::pair{CudaApi::kFuncSharedSizeBytes, &l.static_shared_bytes}}) {
    if (CUresult r = api_->cuda->cuFuncGetAttribute(out, attribute, function); r != kSuccess) {
      return tl::unexpected(api_->error(r, "cuFuncGetAttribute"));
    }
  }
  api_->cuda->cuDeviceGetAttribute(&l.device_max_shared_per_block,
                                   CudaApi::kAttrMaxSharedPerBlockOptin, api_->device);
  if (l.device_max_shared_per_block <= 0) { // a driver without opt-in: the default
    api_->cuda->cuDeviceGetAttribute(&l.device_max_shared_per_block,
                                     CudaApi::kAttrMaxSharedPerBlock, api_->device);
  }
  return l;
}

tl::expected<void, std::string> CudaDriver::allow_dynamic_shared(Handle function, int bytes) {
  if (CUresult r =
          api_->cuda->cuFuncSetAttribute(function, CudaApi::kFuncMaxDynamicSharedSizeBytes, bytes);
      r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, " +
                                             std::to_string(bytes) + ")"));
  }
  return {};
}

tl::expected<double, std::string>
CudaDriver::time_ms(const std::function<tl::expected<void, std::string>()>& work) {
  Handle start = nullptr, stop = nullptr;
  if (CUresult r = api_->cuda->cuEventCreate(&start, 0); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuEventCreate"));
  }
  if (CUresult r = api_->cuda->cuEventCreate(&stop, 0); r != kSuccess) {
    api_->cuda->cuEventDestroy(start);
    return tl::unexpected(api_->error(r, "cuEventCreate"));
  }
  tl::expected<double, std::string> out = tl::unexpected(std::string("not timed"));
  api_->cuda->cuEventRecord(start, nullptr);
  auto done = work();
  api_->cuda->cuEventRecord(stop, nullptr);
  float ms = 0;
  if (!done) {
    out = tl::unexpected(done.error());
  } else if (CUresult r = api_->cuda->cuEventSynchronize(stop); r != kSuccess) {
    out = tl::unexpected(api_->error(r, "the kernel failed"));
  } else if (CUresult e = api_->cuda->cuEventElapsedTime(&ms, start, stop); e != kSuccess) {
    out = tl::unexpected(api_->error(e, "cuEventElapsedTime"));
  } else {
    out = static_cast<double>(ms);
  }
  api_->cuda->cuEventDestroy(start);
  api_->cuda->cuEventDestroy(stop);
  return out;
}

} // namespace kcache::compiler
