#include <kcache/compiler/cuda_driver.h>

#include <dlfcn.h>

namespace kcache::compiler {

namespace {
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
constexpr CUresult kSuccess = 0;
constexpr int kAttrCcMajor = 75;
constexpr int kAttrCcMinor = 76;
constexpr int kAttrMaxSharedPerBlock = 8;
constexpr int kFuncMaxThreads = 0;
constexpr int kFuncSharedBytes = 1;
constexpr int kFuncNumRegs = 4;

struct DlClose {
  void operator()(void* h) const { dlclose(h); }
};
} // namespace

struct CudaDriver::Api {
  std::unique_ptr<void, DlClose> lib;
  CUcontext context = nullptr;
  CUdevice device = 0;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuModuleLoadData)(Handle*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(Handle) = nullptr;
  CUresult (*cuModuleGetFunction)(Handle*, Handle, const char*) = nullptr;
  CUresult (*cuMemAlloc)(DevicePtr*, std::size_t) = nullptr;
  CUresult (*cuMemFree)(DevicePtr) = nullptr;
  CUresult (*cuMemcpyHtoD)(DevicePtr, const void*, std::size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, DevicePtr, std::size_t) = nullptr;
  CUresult (*cuLaunchKernel)(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void*, void**, void**) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuMemsetD8)(DevicePtr, unsigned char, std::size_t) = nullptr;
  CUresult (*cuFuncGetAttribute)(int*, int, Handle) = nullptr;
  CUresult (*cuEventCreate)(Handle*, unsigned) = nullptr;
  CUresult (*cuEventRecord)(Handle, Handle) = nullptr;
  CUresult (*cuEventSynchronize)(Handle) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, Handle, Handle) = nullptr;
  CUresult (*cuEventDestroy)(Handle) = nullptr;

  template <typename Fn> bool load(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(dlsym(lib.get(), name));
    return fn != nullptr;
  }

  std::string error(CUresult r, const std::string& what) const {
    const char* text = nullptr;
    if (cuGetErrorString != nullptr) {
      cuGetErrorString(r, &text);
    }
    return what + ": CUDA error " + std::to_string(r) +
           (text ? std::string(" (") + text + ")" : "");
  }
};

tl::expected<std::unique_ptr<CudaDriver>, std::string> CudaDriver::open(int ordinal) {
  auto api = std::make_unique<Api>();
  api->lib.reset(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!api->lib) {
    return tl::unexpected(std::string("no CUDA driver on this host (libcuda.so.1: ") + dlerror() +
                          ")");
  }
  // The _v2 entry points are the ones the CUDA headers map the plain names to.
  const bool resolved =
      api->load(api->cuInit, "cuInit") && api->load(api->cuDeviceGet, "cuDeviceGet") &&
      api->load(api->cuDeviceGetName, "cuDeviceGetName") &&
      api->load(api->cuDeviceGetAttribute, "cuDeviceGetAttribute") &&
      api->load(api->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
      api->load(api->cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2") &&
      api->load(api->cuCtxSetCurrent, "cuCtxSetCurrent") &&
      api->load(api->cuModuleLoadData, "cuModuleLoadData") &&
      api->load(api->cuModuleUnload, "cuModuleUnload") &&
      api->load(api->cuModuleGetFunction, "cuModuleGetFunction") &&
      api->load(api->cuMemAlloc, "cuMemAlloc_v2") && api->load(api->cuMemFree, "cuMemFree_v2") &&
      api->load(api->cuMemcpyHtoD, "cuMemcpyHtoD_v2") &&
      api->load(api->cuMemcpyDtoH, "cuMemcpyDtoH_v2") &&
      api->load(api->cuLaunchKernel, "cuLaunchKernel") &&
      api->load(api->cuCtxSynchronize, "cuCtxSynchronize") &&
      api->load(api->cuGetErrorString, "cuGetErrorString") &&
      api->load(api->cuMemsetD8, "cuMemsetD8_v2") &&
      api->load(api->cuFuncGetAttribute, "cuFuncGetAttribute") &&
      api->load(api->cuEventCreate, "cuEventCreate") &&
      api->load(api->cuEventRecord, "cuEventRecord") &&
      api->load(api->cuEventSynchronize, "cuEventSynchronize") &&
      api->load(api->cuEventElapsedTime, "cuEventElapsedTime") &&
      api->load(api->cuEventDestroy, "cuEventDestroy_v2");
  if (!resolved) {
    return tl::unexpected(std::string("libcuda.so.1 lacks an entry point kcache needs"));
  }
  if (CUresult r = api->cuInit(0); r != kSuccess) {
    return tl::unexpected(api->error(r, "cuInit"));
  }
  if (CUresult r = api->cuDeviceGet(&api->device, ordinal); r != kSuccess) {
    return tl::unexpected(api->error(r, "cuDeviceGet(" + std::to_string(ordinal) + ")"));
  }
  DeviceInfo info;
  char name[256] = {};
  api->cuDeviceGetName(name, sizeof name, api->device);
  info.name = name;
  api->cuDeviceGetAttribute(&info.cc_major, kAttrCcMajor, api->device);
  api->cuDeviceGetAttribute(&info.cc_minor, kAttrCcMinor, api->device);
  if (CUresult r = api->cuDevicePrimaryCtxRetain(&api->context, api->device); r != kSuccess) {
    return tl::unexpected(api->error(r, "cuDevicePrimaryCtxRetain"));
  }
  if (CUresult r = api->cuCtxSetCurrent(api->context); r != kSuccess) {
    api->cuDevicePrimaryCtxRelease(api->device);
    return tl::unexpected(api->error(r, "cuCtxSetCurrent"));
  }
  return std::make_unique<CudaDriver>(std::move(api), std::move(info));
}

CudaDriver::CudaDriver(std::unique_ptr<Api> api, DeviceInfo device)
    : api_(std::move(api)), device_(std::move(device)) {}

CudaDriver::~CudaDriver() {
  for (Handle m : modules_) {
    api_->cuModuleUnload(m);
  }
  api_->cuDevicePrimaryCtxRelease(api_->device);
}

tl::expected<CudaDriver::Handle, std::string> CudaDriver::load_module(const std::string& cubin) {
  Handle module = nullptr;
  if (CUresult r = api_->cuModuleLoadData(&module, cubin.data()); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuModuleLoadData"));
  }
  modules_.push_back(module);
  return module;
}

tl::expected<CudaDriver::Handle, std::string> CudaDriver::function(Handle module,
                                                                   const std::string& name) {
  Handle fn = nullptr;
  if (CUresult r = api_->cuModuleGetFunction(&fn, module, name.c_str()); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuModuleGetFunction(" + name + ")"));
  }
  return fn;
}

tl::expected<CudaDriver::DevicePtr, std::string> CudaDriver::alloc(std::size_t bytes) {
  DevicePtr ptr = 0;
  if (CUresult r = api_->cuMemAlloc(&ptr, bytes); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuMemAlloc"));
  }
  return ptr;
}

void CudaDriver::free(DevicePtr ptr) {
  api_->cuMemFree(ptr);
}

tl::expected<void, std::string> CudaDriver::copy_to_device(DevicePtr dst, const void* src,
                                                           std::size_t bytes) {
  if (CUresult r = api_->cuMemcpyHtoD(dst, src, bytes); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuMemcpyHtoD"));
  }
  return {};
}

tl::expected<void, std::string> CudaDriver::copy_to_host(void* dst, DevicePtr src,
                                                         std::size_t bytes) {
  if (CUresult r = api_->cuMemcpyDtoH(dst, src, bytes); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuMemcpyDtoH"));
  }
  return {};
}

tl::expected<void, std::string> CudaDriver::launch(Handle function, unsigned grid_x,
                                                   unsigned block_x, unsigned shared_bytes,
                                                   std::vector<void*> args) {
  if (CUresult r = api_->cuLaunchKernel(function, grid_x, 1, 1, block_x, 1, 1, shared_bytes,
                                        nullptr, args.data(), nullptr);
      r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuLaunchKernel"));
  }
  return {};
}

tl::expected<void, std::string> CudaDriver::synchronize() {
  if (CUresult r = api_->cuCtxSynchronize(); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuCtxSynchronize"));
  }
  return {};
}

tl::expected<void, std::string> CudaDriver::zero(DevicePtr ptr, std::size_t bytes) {
  if (CUresult r = api_->cuMemsetD8(ptr, 0, bytes); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuMemsetD8"));
  }
  return {};
}

tl::expected<CudaDriver::FunctionLimits, std::string> CudaDriver::limits(Handle function) {
  FunctionLimits l;
  for (auto [attribute, out] :
       {std::pair{kFuncMaxThreads, &l.max_threads_per_block}, std::pair{kFuncNumRegs, &l.registers},
        std::pair{kFuncSharedBytes, &l.static_shared_bytes}}) {
    if (CUresult r = api_->cuFuncGetAttribute(out, attribute, function); r != kSuccess) {
      return tl::unexpected(api_->error(r, "cuFuncGetAttribute"));
    }
  }
  api_->cuDeviceGetAttribute(&l.device_max_shared_per_block, kAttrMaxSharedPerBlock, api_->device);
  return l;
}

tl::expected<double, std::string>
CudaDriver::time_ms(const std::function<tl::expected<void, std::string>()>& work) {
  Handle start = nullptr, stop = nullptr;
  if (CUresult r = api_->cuEventCreate(&start, 0); r != kSuccess) {
    return tl::unexpected(api_->error(r, "cuEventCreate"));
  }
  if (CUresult r = api_->cuEventCreate(&stop, 0); r != kSuccess) {
    api_->cuEventDestroy(start);
    return tl::unexpected(api_->error(r, "cuEventCreate"));
  }
  tl::expected<double, std::string> out = tl::unexpected(std::string("not timed"));
  api_->cuEventRecord(start, nullptr);
  auto done = work();
  api_->cuEventRecord(stop, nullptr);
  float ms = 0;
  if (!done) {
    out = tl::unexpected(done.error());
  } else if (CUresult r = api_->cuEventSynchronize(stop); r != kSuccess) {
    out = tl::unexpected(api_->error(r, "the kernel failed"));
  } else if (CUresult e = api_->cuEventElapsedTime(&ms, start, stop); e != kSuccess) {
    out = tl::unexpected(api_->error(e, "cuEventElapsedTime"));
  } else {
    out = static_cast<double>(ms);
  }
  api_->cuEventDestroy(start);
  api_->cuEventDestroy(stop);
  return out;
}

} // namespace kcache::compiler
