// gpu_check: on a GPU host, loads the CUBINs that kcache_cubin_corpus compiled
// elsewhere through the CUDA driver API (dlopen'ed), runs each kernel on
// random inputs and compares the result with a CPU reference.
//
//   gpu_check CORPUS_DIR        exit 0 only if every kernel matches

#include <kcache/compiler/cuda_driver.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

using kcache::compiler::CudaDriver;

namespace {

struct Check {
  bool ok = false;
  double max_error = 0;
  std::string detail;
};

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& f : v) {
    f = dist(rng);
  }
  return v;
}

Check compare(const std::vector<float>& got, const std::vector<float>& want, double tolerance) {
  Check c{true, 0, ""};
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    c.max_error = std::max(c.max_error, err);
    if (!(err <= tolerance * (1 + std::fabs(want[i])))) {
      c.ok = false;
      c.detail = "element " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " +
                 std::to_string(want[i]);
      return c;
    }
  }
  return c;
}

// Runs one kernel kind; every buffer is allocated and freed here.
Check run(CudaDriver& gpu, CudaDriver::Handle fn, const std::string& kind) {
  auto fail = [](const std::string& e) { return Check{false, 0, e}; };
  constexpr int kN = 1 << 20;
  constexpr int kRows = 512, kCols = 1000;
  std::vector<CudaDriver::DevicePtr> buffers;
  auto device_copy = [&](const std::vector<float>& host) -> CudaDriver::DevicePtr {
    auto p = gpu.alloc(host.size() * sizeof(float));
    if (!p) {
      return 0;
    }
    buffers.push_back(*p);
    (void)gpu.copy_to_device(*p, host.data(), host.size() * sizeof(float));
    return *p;
  };
  auto result = [&](CudaDriver::DevicePtr p, std::size_t n) {
    std::vector<float> host(n);
    (void)gpu.copy_to_host(host.data(), p, n * sizeof(float));
    return host;
  };
  Check check;
  if (kind == "axpy") {
    auto x = random_floats(kN, 1), y = random_floats(kN, 2), want = y;
    float a = 1.75f;
    int n = kN;
    for (int i = 0; i < kN; ++i) {
      want[i] = a * x[i] + y[i];
    }
    CudaDriver::DevicePtr dx = device_copy(x), dy = device_copy(y);
    if (auto ok = gpu.launch(fn, (kN + 255) / 256, 256, 0, {&a, &dx, &dy, &n}); !ok) {
      return fail(ok.error());
    }
    check = gpu.synchronize() ? compare(result(dy, kN), want, 1e-6) : fail("synchronize");
  } else if (kind == "row_sum") {
    auto x = random_floats(static_cast<std::size_t>(kRows) * kCols, 3);
    std::vector<float> want(kRows, 0.f), zeros(kRows, 0.f);
    for (int r = 0; r < kRows; ++r) {
      double acc = 0;
      for (int c = 0; c < kCols; ++c) {
        acc += x[static_cast<std::size_t>(r) * kCols + c];
      }
      want[r] = static_cast<float>(acc);
    }
    int cols = kCols;
    CudaDriver::DevicePtr dx = device_copy(x), dout = device_copy(zeros);
    if (auto ok = gpu.launch(fn, kRows, 256, 0, {&dx, &dout, &cols}); !ok) {
      return fail(ok.error());
    }
    check = gpu.synchronize() ? compare(result(dout, kRows), want, 1e-4) : fail("synchronize");
  } else if (kind == "scale_f4" || kind == "scale_inplace") {
    auto x = random_floats(kN, 4);
    std::vector<float> want(kN), zeros(kN, 0.f);
    float a = -2.5f;
    int n = kN;
    for (int i = 0; i < kN; ++i) {
      want[i] = a * x[i];
    }
    CudaDriver::DevicePtr dx = device_copy(x);
    if (kind == "scale_f4") {
      CudaDriver::DevicePtr dy = device_copy(zeros);
      if (auto ok = gpu.launch(fn, (kN / 4 + 255) / 256, 256, 0, {&dx, &dy, &a, &n}); !ok) {
        return fail(ok.error());
      }
      check = gpu.synchronize() ? compare(result(dy, kN), want, 1e-6) : fail("synchronize");
    } else {
      if (auto ok = gpu.launch(fn, (kN + 255) / 256, 256, 0, {&dx, &a, &n}); !ok) {
        return fail(ok.error());
      }
      check = gpu.synchronize() ? compare(result(dx, kN), want, 1e-6) : fail("synchronize");
    }
  } else {
    check = fail("unknown kernel kind " + kind);
  }
  for (auto p : buffers) {
    gpu.free(p);
  }
  return check;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gpu_check CORPUS_DIR\n");
    return 2;
  }
  auto gpu = CudaDriver::open(0);
  if (!gpu) {
    std::fprintf(stderr, "gpu_check: %s\n", gpu.error().c_str());
    return 3;
  }
  std::printf("device: %s (cc %d.%d)\n\n%-26s %-34s %-6s %12s\n", (*gpu)->device().name.c_str(),
              (*gpu)->device().cc_major, (*gpu)->device().cc_minor, "cubin", "function", "result",
              "max |error|");
  std::ifstream manifest(std::string(argv[1]) + "/manifest.txt");
  std::string file, function, kind;
  int passed = 0, failed = 0;
  while (manifest >> file >> function >> kind) {
    std::ifstream in(std::string(argv[1]) + "/" + file, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    Check c;
    auto module = (*gpu)->load_module(bytes.str());
    auto fn = module ? (*gpu)->function(*module, function)
                     : tl::expected<void*, std::string>(tl::unexpected(module.error()));
    c = fn ? run(**gpu, *fn, kind) : Check{false, 0, fn.error()};
    std::printf("%-26s %-34s %-6s %12.3g %s\n", file.c_str(), function.c_str(),
                c.ok ? "ok" : "FAIL", c.max_error, c.detail.c_str());
    (c.ok ? passed : failed)++;
  }
  std::printf("\n%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
