#include "llvm_backend.h"

#include "entry_points.h"
#include "shared_object_linker.h"
#include "toolchain_identity.h"

#include <kcache/compiler/diagnostics.h>

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <mutex>

namespace kcache::compiler {
namespace {

void initialize_llvm_targets() {
  // LLVM's target registry is process-wide; fill it once.
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    // Inline asm in a kernel needs the parser (without it LLVM aborts). Its
    // file directives (.incbin, .include) are refused at submit, and the
    // worker is confined to the toolchain's files anyway.
    llvm::InitializeNativeTargetAsmParser();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

CompileError invalid(std::string message) {
  return CompileError{CompileError::Code::kInvalidSpec, std::move(message), {}};
}

struct CodegenOptions {
  llvm::OptimizationLevel level = llvm::OptimizationLevel::O3;
  llvm::CodeGenOptLevel codegen = llvm::CodeGenOptLevel::Aggressive;
  std::string features;
  bool fast_math = false;
};

tl::expected<CodegenOptions, CompileError> parse_options(const std::vector<std::string>& options) {
  CodegenOptions o;
  for (const std::string& opt : options) {
    if (opt == "-O0") {
      o.level = llvm::OptimizationLevel::O0;
      o.codegen = llvm::CodeGenOptLevel::None;
    } else if (opt == "-O1") {
      o.level = llvm::OptimizationLevel::O1;
      o.codegen = llvm::CodeGenOptLevel::Less;
    } else if (opt == "-O2") {
      o.level = llvm::OptimizationLevel::O2;
      o.codegen = llvm::CodeGenOptLevel::Default;
    } else if (opt == "-O3") {
      o.level = llvm::OptimizationLevel::O3;
      o.codegen = llvm::CodeGenOptLevel::Aggressive;
    } else if (opt.starts_with("-mattr=")) {
      o.features += (o.features.empty() ? "" : ",") + opt.substr(7);
    } else if (opt == "-ffast-math") {
      o.fast_math = true;
    } else {
      return tl::unexpected(invalid("llvm backend: unsupported option '" + opt + "'"));
    }
  }
  return o;
}

} // namespace

cachekey::ToolchainFingerprint LlvmBackend::toolchain() const {
  cachekey::ToolchainFingerprint fp;
  fp.add("llvm", LLVM_VERSION_STRING)
      .add("llvm-library",
           library_identity(reinterpret_cast<const void*>(&llvm::sys::getHostCPUName)))
      .add("lld", lld_version())
      .add("kcache", std::string(cachekey::kKcacheCodegenVersion));
  return fp;
}

CompileOutcome emit_module(llvm::Module& module, const CompileSpec& spec,
                           std::chrono::steady_clock::time_point start, std::string log) {
  initialize_llvm_targets();
  auto options = parse_options(spec.options);
  if (!options) {
    return tl::unexpected(options.error());
  }
  const bool ptx = spec.output == OutputKind::kPtx;
  const bool shared = spec.output == OutputKind::kSharedObject;
  if (!ptx && !shared && spec.output != OutputKind::kObject) {
    return tl::unexpected(invalid("this backend emits an object, a shared object or PTX"));
  }
  std::string cpu = spec.target.empty() ? "x86-64" : spec.target;
  if (ptx && !spec.target.starts_with("sm_")) {
    return tl::unexpected(invalid("PTX needs an sm_XX target, got '" + spec.target + "'"));
  }
  if (!ptx && cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
  }
  const std::string triple = ptx ? "nvptx64-nvidia-cuda" : "x86_64-unknown-linux-gnu";
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (target == nullptr) {
    return tl::unexpected(CompileError{CompileError::Code::kUnavailable, error, {}});
  }
  llvm::TargetOptions target_options;
  if (options->fast_math) {
    target_options.UnsafeFPMath = true;
    target_options.NoInfsFPMath = true;
    target_options.NoNaNsFPMath = true;
  }
  std::unique_ptr<llvm::TargetMachine> machine(
      target->createTargetMachine(triple, cpu, options->features, target_options, llvm::Reloc::PIC_,
                                  std::nullopt, options->codegen));
  if (!machine) {
    return tl::unexpected(invalid("LLVM cannot target " + triple + " / " + cpu));
  }
  if (!ptx && !machine->getMCSubtargetInfo()->isCPUStringValid(cpu)) {
    return tl::unexpected(invalid("unknown CPU '" + cpu + "' for " + triple));
  }
  module.setTargetTriple(triple);
  module.setDataLayout(machine->createDataLayout());

  // The standard -O pipeline, as clang runs it.
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(machine.get());
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager passes = options->level == llvm::OptimizationLevel::O0
                                       ? builder.buildO0DefaultPipeline(options->level)
                                       : builder.buildPerModuleDefaultPipeline(options->level);
  passes.run(module, mam);
  // After the pipeline: what is left is what the object will define.
  if (!ptx && std::none_of(module.begin(), module.end(), [](const llvm::Function& f) {
        return !f.isDeclaration() && !f.hasLocalLinkage() && !f.hasAvailableExternallyLinkage();
      })) {
    CompileError empty = no_entry_points("the module defines no global function");
    empty.log = std::move(log);
    return tl::unexpected(std::move(empty));
  }

  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream out(buffer);
  llvm::legacy::PassManager emit;
  if (machine->addPassesToEmitFile(emit, out, nullptr,
                                   ptx ? llvm::CodeGenFileType::AssemblyFile
                                       : llvm::CodeGenFileType::ObjectFile)) {
    return tl::unexpected(invalid("LLVM cannot emit this file type for " + triple));
  }
  emit.run(module);

  CompileResult result;
  result.kind = spec.output;
  result.binary.assign(buffer.begin(), buffer.end());
  if (auto empty = check_entry_points(spec.output, result.binary)) {
    empty->log = std::move(log);
    return tl::unexpected(std::move(*empty));
  }
  if (shared) {
    auto linked = link_shared_object(result.binary);
    if (!linked) {
      return tl::unexpected(linked.error());
    }
    result.binary = std::move(*linked);
  }
  result.log = std::move(log);
  for (const std::string& name : spec.name_expressions) {
    if (module.getFunction(name) == nullptr) {
      return tl::unexpected(invalid("no function '" + name + "' in the module"));
    }
    result.lowered_names[name] = name;
  }
  result.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  return result;
}

CompileOutcome LlvmBackend::compile(const CompileSpec& spec) const {
  const auto start = std::chrono::steady_clock::now();
  llvm::LLVMContext context;
  llvm::SMDiagnostic diagnostic;
  std::unique_ptr<llvm::Module> module =
      llvm::parseIR(llvm::MemoryBufferRef(spec.source.text, spec.source.name), diagnostic, context);
  if (!module) {
    std::string log;
    llvm::raw_string_ostream os(log);
    diagnostic.print(spec.source.name.c_str(), os, /*ShowColors=*/false);
    return tl::unexpected(tidy_error(
        CompileError{CompileError::Code::kCompileFailed, "LLVM IR does not parse", os.str()}));
  }
  std::string verify_log;
  llvm::raw_string_ostream verify_os(verify_log);
  if (llvm::verifyModule(*module, &verify_os)) {
    // The verifier's lines carry no "error:"; its first one says what is wrong.
    verify_os.flush();
    const std::string first = verify_log.substr(0, verify_log.find('\n'));
    return tl::unexpected(tidy_error(CompileError{CompileError::Code::kCompileFailed,
                                                  "LLVM IR is invalid: " + first, verify_log}));
  }
  return emit_module(*module, spec, start, {});
}

} // namespace kcache::compiler
