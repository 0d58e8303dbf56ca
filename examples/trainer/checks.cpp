#include "checks.h"

#include <kcache/compiler/cubin.h>
#include <kcache/compiler/memory_object.h>

#include <cmath>
#include <random>

namespace kcache::trainer {
namespace {

std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) {
    f = dist(rng);
  }
  return v;
}

double unary_ref(const std::string& op, double v) {
  if (op == "relu") {
    return v > 0 ? v : 0;
  }
  if (op == "gelu") {
    return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  }
  if (op == "silu") {
    return v / (1 + std::exp(-v));
  }
  if (op == "sigmoid") {
    return 1 / (1 + std::exp(-v));
  }
  if (op == "tanh") {
    return std::tanh(v);
  }
  return std::exp(v);
}

double binary_ref(const std::string& op, double a, double b) {
  if (op == "add") {
    return a + b;
  }
  if (op == "mul") {
    return a * b;
  }
  if (op == "sub") {
    return a - b;
  }
  return std::max(a, b);
}

template <typename Fn> Fn as(void* symbol) {
  return reinterpret_cast<Fn>(symbol);
}

} // namespace

Problem make_problem(const Kernel& kernel) {
  Problem p;
  switch (kernel.family) {
  case Family::kUnary: {
    p.n = (1 << 16) + 7;
    p.inputs = {random_floats(p.n, 1, -3, 3)};
    for (float v : p.inputs[0]) {
      p.expected.push_back(static_cast<float>(unary_ref(kernel.op, v)));
    }
    p.tolerance = 2e-3; // fast-math transcendentals on the GPU
    break;
  }
  case Family::kBinary: {
    p.n = (1 << 16) + 7;
    p.inputs = {random_floats(p.n, 2), random_floats(p.n, 3)};
    for (int i = 0; i < p.n; ++i) {
      p.expected.push_back(
          static_cast<float>(binary_ref(kernel.op, p.inputs[0][i], p.inputs[1][i])));
    }
    break;
  }
  case Family::kReduce: {
    p.n = (1 << 16) + 3;
    p.inputs = {random_floats(p.n, 4)};
    double acc = kernel.op == "max" ? -1e300 : 0;
    for (float v : p.inputs[0]) {
      acc = kernel.op == "max" ? std::max(acc, static_cast<double>(v)) : acc + v;
    }
    p.expected = {static_cast<float>(acc)};
    p.tolerance = 1e-3; // float accumulation in another order
    break;
  }
  case Family::kSoftmax:
  case Family::kLayerNorm: {
    p.rows = 64;
    p.cols = 1000;
    p.inputs = {random_floats(static_cast<std::size_t>(p.rows) * p.cols, 5, -4, 4)};
    if (kernel.family == Family::kLayerNorm) {
      p.inputs.push_back(random_floats(p.cols, 6, 0.5f, 1.5f));
      p.inputs.push_back(random_floats(p.cols, 7));
      p.scalar = 1e-5F;
    }
    for (int r = 0; r < p.rows; ++r) {
      const float* x = &p.inputs[0][static_cast<std::size_t>(r) * p.cols];
      if (kernel.family == Family::kSoftmax) {
        double m = -1e300, sum = 0;
        for (int c = 0; c < p.cols; ++c) {
          m = std::max(m, static_cast<double>(x[c]));
        }
        for (int c = 0; c < p.cols; ++c) {
          sum += std::exp(x[c] - m);
        }
        for (int c = 0; c < p.cols; ++c) {
          p.expected.push_back(static_cast<float>(std::exp(x[c] - m) / sum));
        }
      } else {
        double mean = 0, var = 0;
        for (int c = 0; c < p.cols; ++c) {
          mean += x[c];
        }
        mean /= p.cols;
        for (int c = 0; c < p.cols; ++c) {
          var += (x[c] - mean) * (x[c] - mean);
        }
        const double rstd = 1 / std::sqrt(var / p.cols + p.scalar);
        for (int c = 0; c < p.cols; ++c) {
          p.expected.push_back(
              static_cast<float>((x[c] - mean) * rstd * p.inputs[1][c] + p.inputs[2][c]));
        }
      }
    }
    p.tolerance = 2e-3;
    break;
  }
  case Family::kGemm: {
    p.m = 200; // not multiples of the tiles: the edges are exercised
    p.cols_n = 136;
    p.k = 72;
    p.inputs = {random_floats(static_cast<std::size_t>(p.m) * p.k, 8),
                random_floats(static_cast<std::size_t>(p.k) * p.cols_n, 9),
                random_floats(p.cols_n, 10)};
    for (int i = 0; i < p.m; ++i) {
      for (int j = 0; j < p.cols_n; ++j) {
        double acc = 0;
        for (int kk = 0; kk < p.k; ++kk) {
          acc += static_cast<double>(p.inputs[0][static_cast<std::size_t>(i) * p.k + kk]) *
                 p.inputs[1][static_cast<std::size_t>(kk) * p.cols_n + j];
        }
        if (kernel.op == "bias_relu") {
          acc = std::max(0.0, acc + p.inputs[2][j]);
        }
        p.expected.push_back(static_cast<float>(acc));
      }
    }
    p.tolerance = 1e-4;
    break;
  }
  case Family::kSaxpy: {
    p.n = (1 << 16) + 5;
    p.scalar = 1.75F;
    p.inputs = {random_floats(p.n, 11), random_floats(p.n, 12)};
    for (int i = 0; i < p.n; ++i) {
      p.expected.push_back(p.scalar * p.inputs[0][i] + p.inputs[1][i]);
    }
    break;
  }
  }
  return p;
}

CheckResult compare(const std::vector<float>& got, const Problem& problem) {
  CheckResult c{true, 0, ""};
  if (got.size() != problem.expected.size()) {
    return {false, 0, "wrong output size"};
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double want = problem.expected[i];
    const double err = std::fabs(static_cast<double>(got[i]) - want);
    c.max_error = std::max(c.max_error, err);
    if (!(err <= problem.tolerance * (1 + std::fabs(want)))) {
      c.ok = false;
      c.detail = "element " + std::to_string(i) + ": got " + std::to_string(got[i]) +
                 ", expected " + std::to_string(want);
      return c;
    }
  }
  return c;
}

CheckResult check_cpu(const Kernel& kernel, const std::string& shared_object) {
  compiler::MemoryObject object(shared_object);
  void* fn = object.symbol(kernel.entry);
  if (fn == nullptr) {
    return {false, 0, "cannot load " + kernel.entry + ": " + object.error()};
  }
  Problem p = make_problem(kernel);
  std::vector<float> out(p.expected.size());
  auto& in = p.inputs;
  switch (kernel.family) {
  case Family::kUnary:
    as<void (*)(const float*, float*, int)>(fn)(in[0].data(), out.data(), p.n);
    break;
  case Family::kBinary:
    as<void (*)(const float*, const float*, float*, int)>(fn)(in[0].data(), in[1].data(),
                                                              out.data(), p.n);
    break;
  case Family::kReduce:
    as<void (*)(const float*, float*, int)>(fn)(in[0].data(), out.data(), p.n);
    break;
  case Family::kSoftmax:
    as<void (*)(const float*, float*, int, int)>(fn)(in[0].data(), out.data(), p.rows, p.cols);
    break;
  case Family::kLayerNorm:
    as<void (*)(const float*, const float*, const float*, float*, int, int, float)>(fn)(
        in[0].data(), in[1].data(), in[2].data(), out.data(), p.rows, p.cols, p.scalar);
    break;
  case Family::kGemm:
    as<void (*)(const float*, const float*, const float*, float*, int, int, int)>(fn)(
        in[0].data(), in[1].data(), in[2].data(), out.data(), p.m, p.cols_n, p.k);
    break;
  case Family::kSaxpy:
    out = in[1];
    as<void (*)(float, const float*, float*, int)>(fn)(p.scalar, in[0].data(), out.data(), p.n);
    break;
  }
  return compare(out, p);
}

CheckResult check_cubin_arch(const Kernel& kernel, const std::string& cubin) {
  const auto info = compiler::inspect_cubin(cubin);
  const auto want = compiler::sm_of_target(kernel.spec.target);
  if (!info) {
    return {false, 0, "not a CUDA ELF"};
  }
  if (!want || info->sm != *want) {
    return {false, 0, "built for sm_" + std::to_string(info->sm)};
  }
  return {true, 0, ""};
}

std::unique_ptr<GpuChecker> GpuChecker::open(std::string& why_not) {
  auto driver = compiler::CudaDriver::open();
  if (!driver) {
    why_not = driver.error();
    return nullptr;
  }
  return std::make_unique<GpuChecker>(std::move(*driver));
}

CheckResult GpuChecker::check(const Kernel& kernel, const std::string& cubin) {
  using DevicePtr = compiler::CudaDriver::DevicePtr;
  auto module = gpu_->load_module(cubin);
  if (!module) {
    return {false, 0, module.error()};
  }
  auto fn = gpu_->function(*module, kernel.entry);
  if (!fn) {
    return {false, 0, fn.error()};
  }
  Problem p = make_problem(kernel);
  std::vector<DevicePtr> buffers;
  auto upload = [&](const std::vector<float>& host) {
    auto ptr = gpu_->alloc(std::max<std::size_t>(1, host.size()) * sizeof(float));
    DevicePtr d = ptr ? *ptr : 0;
    if (d != 0) {
      buffers.push_back(d);
      (void)gpu_->copy_to_device(d, host.data(), host.size() * sizeof(float));
    }
    return d;
  };
  constexpr unsigned kReduceBlocks = 64;
  const std::size_t out_size = kernel.family == Family::kReduce ? kReduceBlocks : p.expected.size();
  std::vector<DevicePtr> in;
  for (const auto& host : p.inputs) {
    in.push_back(upload(host));
  }
  DevicePtr out = upload(std::vector<float>(out_size, 0.f));
  auto div_up = [](int a, int b) { return static_cast<unsigned>((a + b - 1) / b); };
  tl::expected<void, std::string> launched;
  switch (kernel.family) {
  case Family::kUnary:
    launched = gpu_->launch(*fn, div_up(p.n, 256 * kernel.vec), 256, 0, {&in[0], &out, &p.n});
    break;
  case Family::kBinary:
    launched = gpu_->launch(*fn, div_up(p.n, 256), 256, 0, {&in[0], &in[1], &out, &p.n});
    break;
  case Family::kReduce:
    launched = gpu_->launch(*fn, kReduceBlocks, static_cast<unsigned>(kernel.block), 0,
                            {&in[0], &out, &p.n});
    break;
  case Family::kSoftmax:
    launched = gpu_->launch(*fn, static_cast<unsigned>(p.rows), static_cast<unsigned>(kernel.block),
                            0, {&in[0], &out, &p.rows, &p.cols});
    break;
  case Family::kLayerNorm:
    launched = gpu_->launch(*fn, static_cast<unsigned>(p.rows), static_cast<unsigned>(kernel.block),
                            0, {&in[0], &in[1], &in[2], &out, &p.rows, &p.cols, &p.scalar});
    break;
  case Family::kGemm:
    launched = gpu_->launch(*fn, div_up(p.m, kernel.tile) * div_up(p.cols_n, kernel.tile),
                            static_cast<unsigned>(kernel.tile * kernel.tile), 0,
                            {&in[0], &in[1], &in[2], &out, &p.m, &p.cols_n, &p.k});
    break;
  case Family::kSaxpy:
    launched = tl::unexpected(std::string("no CUDA saxpy in the corpus"));
    break;
  }
  std::vector<float> got(out_size);
  if (launched) {
    launched = gpu_->synchronize();
  }
  if (launched) {
    (void)gpu_->copy_to_host(got.data(), out, out_size * sizeof(float));
  }
  for (DevicePtr b : buffers) {
    gpu_->free(b);
  }
  if (!launched) {
    return {false, 0, launched.error()};
  }
  if (kernel.family == Family::kReduce) {
    float acc = kernel.op == "max" ? -3.0e38F : 0.F;
    for (float v : got) {
      acc = kernel.op == "max" ? std::max(acc, v) : acc + v;
    }
    got = {acc};
  }
  return compare(got, p);
}

} // namespace kcache::trainer
