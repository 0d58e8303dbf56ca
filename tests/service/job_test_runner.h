#pragma once
// A JobRunner for unit tests: no compiler, no subprocess. A compile's source
// text says what happens: "fail" fails it as the compiler would, "oom" as a
// resource limit, "block" waits at a gate until the test opens it or the job
// is cancelled, "crashN" (N a digit) dies as a killed kcache-worker does on its
// first N runs; anything else succeeds at once with the text as its binary.
// Benchmarks rank the variants by their place in the request.

#include <kcache/service/job_runner.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kcache::service {

class TestRunner final : public JobRunner {
  struct RankingBench final : compiler::BenchSession {
    std::vector<compiler::BenchResult> bench(const compiler::BenchRequest& request,
                                             const std::stop_token& /*stop*/) override {
      std::vector<compiler::BenchResult> out;
      for (std::size_t i = 0; i < request.variants.size(); ++i) {
        const double us = 100.0 - static_cast<double>(i);
        out.push_back({request.variants[i].id, "ok", us, us, 0, ""});
      }
      return out;
    }
    int workers_started() const override { return 0; }
  };

public:
  TestRunner() {
    cachekey::ToolchainFingerprint cpp;
    cpp.add("clang", "test-1");
    cpp.add("targets", "x86-64 x86-64-v2 x86-64-v3");
    toolchains_.emplace(compiler::Backend::kCpp, std::move(cpp));
  }

  compiler::WorkerOutcome run(const compiler::CompileSpec& spec,
                              const std::stop_token& cancel) const override {
    const std::string& text = spec.source.text;
    {
      std::unique_lock lock(mu_);
      started_.push_back(text);
      cv_.notify_all();
      if (text.find("block") != std::string::npos) {
        cv_.wait(lock, cancel, [&] { return open_; });
      }
    }
    using Exit = compiler::WorkerExit;
    auto fail = [](Exit exit, compiler::CompileError::Code code, std::string message) {
      return compiler::WorkerOutcome{
          tl::unexpected(compiler::CompileError{code, std::move(message), "the log"}), {}, exit};
    };
    if (cancel.stop_requested()) {
      return fail(Exit::kCancelled, compiler::CompileError::Code::kCancelled, "cancelled");
    }
    if (const auto crash = text.find("crash");
        crash != std::string::npos && crash + 5 < text.size()) {
      std::lock_guard lock(mu_);
      const auto runs = std::count(started_.begin(), started_.end(), text);
      if (runs <= text[crash + 5] - '0') {
        // As WorkerRunner reports a worker that died by a signal.
        return fail(Exit::kKilledBySignal, compiler::CompileError::Code::kCompileFailed,
                    "kcache-worker crashed with signal Killed");
      }
    }
    if (text.find("fail") != std::string::npos) {
      return fail(Exit::kCompileError, compiler::CompileError::Code::kCompileFailed,
                  "it does not compile");
    }
    if (text.find("oom") != std::string::npos) {
      return fail(Exit::kMemoryLimit, compiler::CompileError::Code::kResourceLimit,
                  "out of memory");
    }
    compiler::CompileResult result;
    result.kind = spec.output;
    result.binary = "binary of " + text;
    return compiler::WorkerOutcome{std::move(result), {}, Exit::kCompleted};
  }

  // Every variant runs correctly; the later in the request, the faster.
  std::unique_ptr<compiler::BenchSession> open_bench() const override {
    return std::make_unique<RankingBench>();
  }
  const compiler::Toolchains& toolchains() const override { return toolchains_; }
  const std::optional<compiler::HostTarget>& host_target() const override { return host_; }
  const std::string& name() const override { return name_; }

  // Lets every blocked compile (and every later one) through.
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  std::size_t runs() const {
    std::lock_guard lock(mu_);
    return started_.size();
  }
  // Waits until `n` compiles have started; their sources in start order.
  std::vector<std::string> started(std::size_t n) const {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return started_.size() >= n; });
    return started_;
  }

private:
  compiler::Toolchains toolchains_;
  std::optional<compiler::HostTarget> host_;
  std::string name_ = "the test runner";
  mutable std::mutex mu_;
  mutable std::condition_variable_any cv_;
  mutable std::vector<std::string> started_;
  bool open_ = false;
};

} // namespace kcache::service
