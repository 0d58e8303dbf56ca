// Cluster job routing (issue 15): the capability a job waits under, and the
// set a node reads.

#include <kcache/service/job_capability.h>
#include <kcache/service/job_runner.h>

#include <gtest/gtest.h>

#include <algorithm>

namespace kcache::service {
namespace {

Job job(std::string backend, std::string output, JobKind kind = JobKind::kCompile,
        std::string tuning_class = "") {
  Job j;
  j.kind = kind;
  j.backend = std::move(backend);
  j.output = std::move(output);
  j.tuning_class = std::move(tuning_class);
  return j;
}

TEST(JobCapability, CompileJobsGoByBackendAndTargetClass) {
  EXPECT_EQ(job_capability(job("cpp", "object"), "x86_64"), "cpp/x86_64");
  EXPECT_EQ(job_capability(job("cpp", "shared"), "aarch64"), "cpp/aarch64");
  // GPU code builds anywhere the toolchain is: one class for every sm_XX.
  EXPECT_EQ(job_capability(job("cuda", "cubin"), "x86_64"), "cuda/cuda");
  EXPECT_EQ(job_capability(job("llvm-ir", "ptx"), "x86_64"), "llvm-ir/cuda");
  EXPECT_EQ(job_capability(job("llvm-ir", "object"), "x86_64"), "llvm-ir/x86_64");
}

TEST(JobCapability, SearchesGoByTuningClass) {
  EXPECT_EQ(job_capability(job("cpp", "shared", JobKind::kAutotune, "x86_64:EPYC:2t"), "x86_64"),
            "autotune/cpp/x86_64:EPYC:2t");
  EXPECT_EQ(job_capability(job("cuda", "cubin", JobKind::kAutotune, "cuda:NVIDIA H100:132sm:80GiB"),
                           "x86_64"),
            "autotune/cuda/cuda:NVIDIA H100:132sm:80GiB");
  EXPECT_EQ(capability_wanted(job("cpp", "shared", JobKind::kAutotune, "cpu:x"), "x86_64"),
            "a node of tuning class cpu:x (cpp backend)");
}

TEST(JobCapability, HashTagAndListSeparatorsAreEscapedNotDropped) {
  // '{' or '}' would end the hash tag early (two classes on one slot's
  // stream by accident); ',' would split the registry's list.
  const std::string a = autotune_capability("cpp", "cpu:{a}");
  const std::string b = autotune_capability("cpp", "cpu:a");
  EXPECT_EQ(a, "autotune/cpp/cpu:%7Ba%7D");
  EXPECT_NE(a, b);
  EXPECT_EQ(escape_capability_part("x,y%z"), "x%2Cy%25z");
  // '%' itself is escaped, so an escaped class cannot collide with a raw one.
  EXPECT_NE(escape_capability_part("%7B"), escape_capability_part("{"));
  EXPECT_EQ(a.find_first_of("{},"), std::string::npos);
}

TEST(JobCapability, NodeServesItsBackendsTargetsAndTuningClasses) {
  const NodeHardware cpu_only{"x86_64", "x86_64:EPYC:2t", ""};
  EXPECT_EQ(node_capabilities({compiler::Backend::kCpp}, cpu_only),
            (std::vector<std::string>{"autotune/cpp/x86_64:EPYC:2t", "cpp/x86_64"}));
  // No GPU: CUDA compiles yes, CUDA searches no.
  EXPECT_EQ(node_capabilities({compiler::Backend::kCuda, compiler::Backend::kLlvmIr}, cpu_only),
            (std::vector<std::string>{"autotune/llvm-ir/x86_64:EPYC:2t", "cuda/cuda",
                                      "llvm-ir/cuda", "llvm-ir/x86_64"}));
  const NodeHardware gpu{"x86_64", "x86_64:EPYC:2t", "cuda:H100"};
  const auto with_gpu = node_capabilities({compiler::Backend::kCuda}, gpu);
  EXPECT_EQ(with_gpu, (std::vector<std::string>{"autotune/cuda/cuda:H100", "cuda/cuda"}));
  // Every job a node submits for itself is one it serves.
  for (const Job& j :
       {job("cpp", "object"), job("cpp", "shared", JobKind::kAutotune, "x86_64:EPYC:2t")}) {
    const auto caps = node_capabilities({compiler::Backend::kCpp}, cpu_only);
    EXPECT_NE(std::find(caps.begin(), caps.end(), job_capability(j, "x86_64")), caps.end());
  }
}

cachekey::GpuInfo gpu(int ordinal, const std::string& name) {
  cachekey::GpuInfo g;
  g.ordinal = ordinal;
  g.name = name;
  g.cc_major = 9;
  g.sm_count = 132;
  g.memory_bytes = 80ULL << 30;
  return g;
}

TEST(BenchGpus, AListOfOrdinalsOrAClearError) {
  EXPECT_EQ(bench_gpus("0,1", {}), (std::vector<int>{0, 1}));
  EXPECT_EQ(bench_gpus("3", {}), (std::vector<int>{3})); // no GPU here: unused, not refused
  for (const char* bad : {"x", "1,", ",1", "-1", "0;1", "1 ,2", "999"}) {
    const auto parsed = bench_gpus(bad, {});
    ASSERT_FALSE(parsed.has_value()) << bad;
    EXPECT_NE(parsed.error().find("GPU ordinals"), std::string::npos) << parsed.error();
  }
  // On a host with GPUs, an ordinal it does not have stops start-up.
  const std::vector<cachekey::GpuInfo> two = {gpu(0, "H100"), gpu(1, "H100")};
  EXPECT_EQ(bench_gpus("1,0", two), (std::vector<int>{1, 0}));
  const auto missing = bench_gpus("0,2", two);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().find("no GPU 2 (this host has 2)"), std::string::npos)
      << missing.error();
}

TEST(BenchGpus, ByDefaultEveryGpuOfTheFirstOnesTuningClass) {
  EXPECT_EQ(bench_gpus("", {}), std::vector<int>{});
  EXPECT_EQ(bench_gpus("", {gpu(0, "H100"), gpu(1, "A100"), gpu(2, "H100")}),
            (std::vector<int>{0, 2}));
}

} // namespace
} // namespace kcache::service
