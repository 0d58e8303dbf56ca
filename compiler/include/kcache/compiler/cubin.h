#pragma once
// What a CUBIN says about itself: its ELF header names the machine (EM_CUDA)
// and, in e_flags, the SM it was built for; its symbol table names the
// kernels. Used to check that a compile produced code for the requested
// target, with something to launch, before anything stores it.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::compiler {

struct CubinInfo {
  int sm = 0; // 90 for sm_90 / sm_90a
  int elf_abi_version = 0;
  // Entry points (__global__ functions), by symbol name: global STT_FUNC
  // symbols marked STO_CUDA_ENTRY. Device functions are not listed.
  std::vector<std::string> kernels;
};

// nullopt unless `bytes` is a 64-bit ELF for EM_CUDA whose section and symbol
// tables (if any) lie within it.
std::optional<CubinInfo> inspect_cubin(std::string_view bytes);

// "sm_90a" -> 90, "compute_100" -> 100; nullopt if it names no SM.
std::optional<int> sm_of_target(std::string_view target);

} // namespace kcache::compiler
