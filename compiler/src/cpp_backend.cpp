#include "cpp_backend.h"

#include "llvm_backend.h"
#include "shared_object_linker.h"
#include "toolchain_identity.h"

#include <kcache/compiler/spec_check.h>

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/Basic/Version.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Driver/Compilation.h>
#include <clang/Driver/Driver.h>
#include <clang/Driver/Job.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/X86TargetParser.h>

#include <algorithm>

namespace kcache::compiler {
namespace {

// Where clang finds its own headers (stddef.h, intrinsics): next to this binary.
constexpr const char* kClangBinary = KCACHE_CLANG_BINARY;
// The spec's files live in memory under this directory, so that "#include"
// resolves them relative to the source, as on disk.
constexpr std::string_view kVirtualDir = "/kcache-spec/";

bool is_codegen_option(const std::string& opt) {
  return opt == "-O0" || opt == "-O1" || opt == "-O2" || opt == "-O3" || opt == "-ffast-math" ||
         opt.starts_with("-mattr=");
}

} // namespace

namespace {

// What clang can read outside the spec: its resource headers, libstdc++ and
// glibc. Digested in the fingerprint, so a header upgrade changes every key.
std::vector<std::string> system_include_dirs() {
  return {clang::driver::Driver::GetResourcesPath(kClangBinary) + "/include", "/usr/include",
          "/usr/local/include"};
}

// The CPU names -march takes on x86-64, for targets refused at submit.
std::string x86_cpu_names() {
  llvm::SmallVector<llvm::StringRef, 128> names;
  llvm::X86::fillValidCPUArchList(names, /*Only64Bit=*/true);
  std::string out;
  for (llvm::StringRef name : names) {
    out += (out.empty() ? "" : " ") + name.str();
  }
  return out;
}

} // namespace

cachekey::ToolchainFingerprint CppBackend::toolchain() const {
  cachekey::ToolchainFingerprint fp;
  fp.add("clang", CLANG_VERSION_STRING)
      .add("clang-library", library_identity(reinterpret_cast<const void*>(
                                static_cast<std::string (*)()>(&clang::getClangFullVersion))))
      .add("llvm-library",
           library_identity(reinterpret_cast<const void*>(&llvm::sys::getHostCPUName)))
      .add("system-include", tree_digest(system_include_dirs()))
      .add(std::string(kTargetsComponent), x86_cpu_names())
      .add("lld", lld_version())
      .add("kcache", std::string(cachekey::kKcacheCodegenVersion));
  return fp;
}

CompileOutcome CppBackend::compile(const CompileSpec& spec) const {
  const auto start = std::chrono::steady_clock::now();
  if (spec.output != OutputKind::kObject && spec.output != OutputKind::kSharedObject) {
    return tl::unexpected(CompileError{
        CompileError::Code::kInvalidSpec, "the cpp backend emits objects or shared objects", {}});
  }
  std::string cpu = spec.target.empty() ? "x86-64" : spec.target;
  if (cpu == "native") {
    cpu = llvm::sys::getHostCPUName().str();
  }
  std::string diagnostics;
  llvm::raw_string_ostream diag_stream(diagnostics);
  llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> diag_options(new clang::DiagnosticOptions());
  // The engine owns the printer (second constructor argument, ShouldOwnClient).
  auto printer = std::make_unique<clang::TextDiagnosticPrinter>(diag_stream, diag_options.get());
  llvm::IntrusiveRefCntPtr<clang::DiagnosticsEngine> diags(new clang::DiagnosticsEngine(
      llvm::IntrusiveRefCntPtr<clang::DiagnosticIDs>(new clang::DiagnosticIDs()), diag_options,
      printer.release(), /*ShouldOwnClient=*/true));

  // 1. The driver turns a clang++ command line into frontend (cc1) arguments.
  clang::driver::Driver driver(kClangBinary, "x86_64-unknown-linux-gnu", *diags);
  driver.setCheckInputsExist(false);
  const std::string march = "-march=" + cpu;
  const std::string source_path = std::string(kVirtualDir) + spec.source.name;
  const std::string include_dir = "-I" + std::string(kVirtualDir);
  std::vector<const char*> args = {kClangBinary,        "-c",
                                   source_path.c_str(), march.c_str(),
                                   include_dir.c_str(), "-fno-exceptions"};
  for (const std::string& opt : spec.options) {
    if (!opt.starts_with("-mattr=")) {
      args.push_back(opt.c_str());
    }
  }
  // Optimization happens once, in the shared LLVM pipeline below.
  args.insert(args.end(), {"-Xclang", "-disable-llvm-passes"});
  std::unique_ptr<clang::driver::Compilation> compilation(driver.BuildCompilation(args));
  if (!compilation || diags->hasErrorOccurred() || compilation->getJobs().empty()) {
    return tl::unexpected(CompileError{CompileError::Code::kInvalidSpec,
                                       "clang driver rejected the options", diag_stream.str()});
  }
  const auto& command = llvm::cast<clang::driver::Command>(*compilation->getJobs().begin());

  // 2. The frontend, on the source held in memory.
  auto invocation = std::make_shared<clang::CompilerInvocation>();
  if (!clang::CompilerInvocation::CreateFromArgs(*invocation, command.getArguments(), *diags)) {
    return tl::unexpected(CompileError{CompileError::Code::kInvalidSpec,
                                       "clang rejected the options", diag_stream.str()});
  }
  // The driver asks cc1 to skip freeing at exit; this process lives on.
  invocation->getFrontendOpts().DisableFree = false;
  // We keep the remapped buffers: clang would free them only once its
  // preprocessor exists, which an early failure (a bad -march) never reaches.
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> buffers;
  invocation->getPreprocessorOpts().RetainRemappedFileBuffers = true;
  auto remap = [&](const SourceFile& file) {
    const std::string path = std::string(kVirtualDir) + file.name;
    buffers.push_back(llvm::MemoryBuffer::getMemBufferCopy(file.text, path));
    invocation->getPreprocessorOpts().addRemappedFile(path, buffers.back().get());
  };
  remap(spec.source);
  for (const SourceFile& header : spec.headers) {
    remap(header);
  }
  clang::CompilerInstance instance;
  instance.setInvocation(std::move(invocation));
  instance.setVerboseOutputStream(diag_stream); // "1 error generated." belongs in the log
  auto frontend_printer =
      std::make_unique<clang::TextDiagnosticPrinter>(diag_stream, &instance.getDiagnosticOpts());
  instance.createDiagnostics(frontend_printer.release(), /*ShouldOwnClient=*/true);
  llvm::LLVMContext context;
  clang::EmitLLVMOnlyAction action(&context);
  if (!instance.ExecuteAction(action)) {
    return tl::unexpected(CompileError{CompileError::Code::kCompileFailed,
                                       "clang could not compile the source", diag_stream.str()});
  }
  std::unique_ptr<llvm::Module> module = action.takeModule();
  if (!module) {
    return tl::unexpected(
        CompileError{CompileError::Code::kInternal, "clang produced no module", diag_stream.str()});
  }

  // 3. Optimize and emit with the LLVM backend's pipeline.
  CompileSpec codegen = spec;
  codegen.target = cpu;
  codegen.options.clear();
  for (const std::string& opt : spec.options) {
    if (is_codegen_option(opt)) {
      codegen.options.push_back(opt);
    }
  }
  if (codegen.options.empty() ||
      std::none_of(codegen.options.begin(), codegen.options.end(),
                   [](const std::string& o) { return o.starts_with("-O"); })) {
    codegen.options.push_back("-O2"); // clang's default when optimizing
  }
  return emit_module(*module, codegen, start, diag_stream.str());
}

} // namespace kcache::compiler
