#pragma once
// The CUDA driver API (cachekey's CudaApi, loaded at run time): load CUBINs, move
// memory, launch kernels. Nothing links libcuda, so every kcache program still
// runs on hosts without a GPU (open() then says why it cannot). Used to check
// and benchmark compiled kernels on GPU workers.

#include <tl/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kcache::compiler {

class CudaDriver {
public:
  // Loads libcuda.so.1, initializes it and makes device `ordinal` current.
  static tl::expected<std::unique_ptr<CudaDriver>, std::string> open(int ordinal = 0);
  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  struct DeviceInfo {
    std::string name;
    int cc_major = 0;
    int cc_minor = 0;
  };
  const DeviceInfo& device() const { return device_; }

  using Handle = void*; // CUmodule, CUfunction
  using DevicePtr = std::uint64_t;

  tl::expected<Handle, std::string> load_module(const std::string& cubin);
  tl::expected<Handle, std::string> function(Handle module, const std::string& name);
  tl::expected<DevicePtr, std::string> alloc(std::size_t bytes);
  void free(DevicePtr ptr);
  tl::expected<void, std::string> copy_to_device(DevicePtr dst, const void* src, std::size_t bytes);
  tl::expected<void, std::string> copy_to_host(void* dst, DevicePtr src, std::size_t bytes);
  // args: pointers to each kernel argument, as cuLaunchKernel takes them.
  tl::expected<void, std::string> launch(Handle function, unsigned grid_x, unsigned block_x,
                                         unsigned shared_bytes, std::vector<void*> args);
  tl::expected<void, std::string> synchronize();
  tl::expected<void, std::string> zero(DevicePtr ptr, std::size_t bytes);

  // What a compiled kernel needs, and what this device allows per block.
  struct FunctionLimits {
    int max_threads_per_block = 0; // for this kernel (registers decide)
    int registers = 0;
    int static_shared_bytes = 0;
    int device_max_shared_per_block = 0; // opted in: 227 KiB on sm_90, not the default 48
  };
  tl::expected<FunctionLimits, std::string> limits(Handle function);
  // A launch with more than 48 KiB of dynamic shared memory needs the
  // function's limit raised first (cudaFuncSetAttribute's job in the runtime).
  tl::expected<void, std::string> allow_dynamic_shared(Handle function, int bytes);

  // GPU time of `work` (launches), measured with CUDA events.
  tl::expected<double, std::string>
  time_ms(const std::function<tl::expected<void, std::string>()>& work);

  struct Api; // resolved entry points, defined in the .cpp
  CudaDriver(std::unique_ptr<Api> api, DeviceInfo device);

private:
  std::unique_ptr<Api> api_;
  DeviceInfo device_;
  std::vector<Handle> modules_;
};

} // namespace kcache::compiler
