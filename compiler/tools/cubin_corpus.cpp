// kcache_cubin_corpus: compiles the GPU check's kernels here (no GPU needed)
// through each path kcache has, and writes CUBINs plus a manifest line per
// kernel ("file function kind") into a folder for scripts/device/ to run.
//
//   kcache_cubin_corpus OUT_DIR [TARGET=sm_90a]

#include "gpu_kernels.h"

#include <kcache/compiler/backends.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace kcache::compiler;

namespace {

CompileOutcome compile(Backend backend, CompileSpec spec) {
  spec.backend = backend;
  auto b = make_backend(backend);
  if (!b) {
    return tl::unexpected(b.error());
  }
  return (*b)->compile(spec);
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kcache_cubin_corpus OUT_DIR [TARGET]\n");
    return 2;
  }
  const std::filesystem::path out = argv[1];
  const std::string target = argc > 2 ? argv[2] : "sm_90a";
  std::filesystem::create_directories(out);
  std::ofstream manifest(out / "manifest.txt");
  int failures = 0;
  auto write = [&](const std::string& file, const CompileOutcome& r, const std::string& function,
                   const std::string& kind, const char* path) {
    if (!r) {
      std::fprintf(stderr, "%s: %s\n%s\n", file.c_str(), r.error().message.c_str(),
                   r.error().log.c_str());
      ++failures;
      return;
    }
    std::ofstream(out / file, std::ios::binary) << r->binary;
    manifest << file << ' ' << function << ' ' << kind << '\n';
    std::printf("%-24s %-34s %7zu bytes  via %s\n", file.c_str(), function.c_str(),
                r->binary.size(), path);
  };

  // 1. NVRTC straight to a CUBIN: extern "C" kernels and a template instance.
  CompileSpec cuda;
  cuda.source = {"gpu_check.cu", kcache::gpu_check::kCudaSource};
  cuda.name_expressions = {"axpy", "row_sum", "scale<float, 4>"};
  cuda.options = {"-std=c++17"};
  cuda.target = target;
  cuda.output = OutputKind::kCubin;
  const auto nvrtc = compile(Backend::kCuda, cuda);
  for (const char* kind : {"axpy", "row_sum"}) {
    write(std::string("nvrtc_") + kind + ".cubin", nvrtc, kind, kind, "NVRTC");
  }
  if (nvrtc) {
    write("nvrtc_scale_f4.cubin", nvrtc, nvrtc->lowered_names.at("scale<float, 4>"), "scale_f4",
          "NVRTC");
  }

  // PTX from either compiler, linked by nvJitLink into a CUBIN.
  auto link_ptx = [&](const CompileOutcome& ptx, const std::string& name) -> CompileOutcome {
    if (!ptx) {
      return ptx;
    }
    CompileSpec link;
    link.source = {name, ptx->binary};
    link.target = target;
    return compile(Backend::kPtx, link);
  };

  // 2. NVRTC to PTX, linked by nvJitLink.
  cuda.output = OutputKind::kPtx;
  write("nvjitlink_row_sum.cubin", link_ptx(compile(Backend::kCuda, cuda), "gpu_check.ptx"),
        "row_sum", "row_sum", "NVRTC PTX + nvJitLink");

  // 3. LLVM IR through NVPTX, linked by nvJitLink.
  CompileSpec ir;
  ir.source = {"scale_inplace.ll", kcache::gpu_check::kNvptxIr};
  ir.name_expressions = {"scale_inplace"};
  ir.target = target;
  ir.output = OutputKind::kPtx;
  write("llvm_scale_inplace.cubin", link_ptx(compile(Backend::kLlvmIr, ir), "scale_inplace.ptx"),
        "scale_inplace", "scale_inplace", "LLVM NVPTX + nvJitLink");
  return failures == 0 ? 0 : 1;
}
