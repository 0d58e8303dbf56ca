#pragma once
// The demo trainer's kernels: a corpus of real CUDA C++ kernels for sm_90a
// (elementwise, reductions, softmax, layer norm, tiled GEMMs) and CPU kernels
// in C++ and LLVM IR, each a compile spec in a few variants (tile sizes,
// vector widths, unroll factors), as a model's graph would ask for them.

#include <kcache/compiler/compile_spec.h>

#include <string>
#include <vector>

namespace kcache::trainer {

enum class Family { kUnary, kBinary, kReduce, kSoftmax, kLayerNorm, kGemm, kSaxpy };
enum class Device { kCuda, kCpu };

struct Kernel {
  std::string name; // unique, readable: "cuda/softmax/block256"
  Family family;
  Device device;
  std::string op;    // unary/binary/reduce op: "gelu", "add", "sum"; gemm epilogue
  int block = 256;   // CUDA threads per block (reductions, softmax, layer norm)
  int vec = 1;       // CUDA elements per thread (elementwise)
  int tile = 16;     // GEMM tile
  std::string entry; // the symbol to load
  compiler::CompileSpec spec;
};

// `cpu_target`: the LLVM CPU name the CPU kernels are compiled for.
std::vector<Kernel> build_corpus(const std::string& cpu_target);

} // namespace kcache::trainer
