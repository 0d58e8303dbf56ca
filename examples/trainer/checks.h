#pragma once
// Checking the kernels the service compiled: each family gets a seeded
// problem and a double-precision reference; CPU kernels are loaded from their
// shared objects (dlopen, no files) and run, CUBINs are checked for their
// architecture and, where a GPU is present, run through the CUDA driver API.

#include "corpus.h"

#include <kcache/compiler/cuda_driver.h>

#include <memory>
#include <string>
#include <vector>

namespace kcache::trainer {

struct Problem {
  std::vector<std::vector<float>> inputs;
  std::vector<float> expected;
  int n = 0, rows = 0, cols = 0, m = 0, k = 0, cols_n = 0;
  float scalar = 0;
  double tolerance = 1e-5;
};

// The inputs and the reference result: also what the trainer runs as its
// fallback while the service compiles.
Problem make_problem(const Kernel& kernel);

struct CheckResult {
  bool ok = false;
  double max_error = 0;
  std::string detail;
};

CheckResult compare(const std::vector<float>& got, const Problem& problem);
CheckResult check_cpu(const Kernel& kernel, const std::string& shared_object);
// The CUBIN's ELF header names sm_90.
CheckResult check_cubin_arch(const Kernel& kernel, const std::string& cubin);

class GpuChecker {
public:
  // nullptr (and why) when there is no usable GPU.
  static std::unique_ptr<GpuChecker> open(std::string& why_not);
  explicit GpuChecker(std::unique_ptr<compiler::CudaDriver> driver) : gpu_(std::move(driver)) {}
  CheckResult check(const Kernel& kernel, const std::string& cubin);
  std::string device_name() const { return gpu_->device().name; }

private:
  std::unique_ptr<compiler::CudaDriver> gpu_;
};

} // namespace kcache::trainer
