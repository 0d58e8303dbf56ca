#include "test_graphs.h"

#include <kcache/cachekey/explain.h>
#include <kcache/cachekey/hardware.h>

#include <gtest/gtest.h>

#include <cstdlib>

namespace kcache::cachekey {
namespace {

KeyManifest manifest(const testing::BlockSpec& spec, std::string hardware = "cuda:sm_90a",
                     std::string nvrtc = "13.0") {
  auto m = KeyBuilder()
               .ns("ex")
               .graph(testing::make_block(spec))
               .guards({"s0 % 16 == 0"})
               .hardware(std::move(hardware))
               .toolchain(ToolchainFingerprint().add("nvrtc", std::move(nvrtc)))
               .options({"-O3"})
               .build();
  EXPECT_TRUE(m.has_value());
  return *m;
}

TEST(Explain, IdenticalKeys) {
  const auto e = explain(manifest({}), manifest({}));
  EXPECT_TRUE(e.diffs.empty());
  EXPECT_NE(to_text(e).find("identical"), std::string::npos);
}

TEST(Explain, NamesTheFirstDifferingNodeNotItsDescendants) {
  testing::BlockSpec changed;
  changed.gelu_approximate = "none";
  const auto e = explain(manifest({}), manifest(changed));
  ASSERT_EQ(e.diffs.size(), 1U);
  EXPECT_EQ(e.diffs[0].component, "graph");
  ASSERT_EQ(e.diffs[0].details.size(), 1U) << to_text(e);
  const std::string& line = e.diffs[0].details[0];
  EXPECT_NE(line.find("'act' (aten.gelu)"), std::string::npos) << line;
  EXPECT_NE(line.find("approximate=\"tanh\""), std::string::npos) << line;
  EXPECT_NE(line.find("approximate=\"none\""), std::string::npos) << line;
  // "add" consumes "act" and changed too, but is not reported as a cause.
  EXPECT_EQ(line.find("'add'"), std::string::npos) << line;
}

TEST(Explain, OperandSwapIsReportedAsRewiring) {
  testing::BlockSpec changed;
  changed.swap_mm_operands = true;
  const auto e = explain(manifest({}), manifest(changed));
  ASSERT_EQ(e.diffs.size(), 1U);
  EXPECT_NE(to_text(e).find("'mm' (aten.mm)"), std::string::npos) << to_text(e);
  EXPECT_NE(to_text(e).find("rewired"), std::string::npos) << to_text(e);
}

TEST(Explain, EveryDifferingComponentIsNamed) {
  testing::BlockSpec changed;
  changed.dtype = "f16";
  const auto e = explain(manifest({}), manifest(changed, "cuda:sm_80", "13.1"));
  std::vector<std::string> components;
  for (const auto& d : e.diffs) {
    components.push_back(d.component);
  }
  EXPECT_EQ(components, (std::vector<std::string>{"graph", "hardware_class", "toolchain"}));
  EXPECT_NE(to_text(e).find("nvrtc: 13.0 -> 13.1"), std::string::npos);
}

TEST(Hardware, CpuFingerprint) {
  const CpuInfo cpu = detect_cpu();
  EXPECT_FALSE(cpu.arch.empty());
  EXPECT_FALSE(cpu.isa_level.empty());
  EXPECT_GE(cpu.logical_cores, 1U);
  const HardwareClass hc = hardware_class(cpu);
  EXPECT_EQ(hc.binary_class, cpu.arch + ":" + cpu.isa_level);
  EXPECT_NE(hc.tuning_class, hc.binary_class);
#if defined(__x86_64__) && defined(__AVX2__)
  EXPECT_TRUE(cpu.isa_level == "avx2" || cpu.isa_level == "avx512");
#endif
}

TEST(Hardware, GpuDetectionNeverFails) {
  // With no driver (CI) this is empty; on a GPU host every entry must be sane.
  for (const GpuInfo& gpu : detect_gpus()) {
    EXPECT_GE(gpu.cc_major, 3);
    EXPECT_GT(gpu.sm_count, 0);
    EXPECT_EQ(hardware_class(gpu).binary_class.rfind("cuda:sm_", 0), 0U);
  }
  if (detect_gpus().empty()) {
    std::fprintf(stderr, "[  NOTE    ] no CUDA driver/GPU here: GPU fingerprint checked empty\n");
  }
}

TEST(Hardware, CudaArchNames) {
  EXPECT_EQ(cuda_arch_name(9, 0), "sm_90a");
  EXPECT_EQ(cuda_arch_name(8, 6), "sm_86");
  EXPECT_EQ(cuda_arch_name(10, 0), "sm_100a");
  GpuInfo h100{0, "NVIDIA H100 80GB HBM3", 9, 0, 132, 85'000'000'000ULL};
  EXPECT_EQ(hardware_class(h100).binary_class, "cuda:sm_90a");
  EXPECT_EQ(hardware_class(h100).tuning_class, "cuda:NVIDIA H100 80GB HBM3:132sm:79GiB");
}

} // namespace
} // namespace kcache::cachekey
