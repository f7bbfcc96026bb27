// The ORC LLJIT instance, the optimisation pipeline and the two-level kernel cache (see jit.h).
#include "backends/cpu/jit.h"
#include "backends/cpu/vector_math.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/Dominators.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/Transforms/Utils/Local.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <variant>

#include "core/error.h"
#include "core/files.h"
#include "core/build_id.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/options.h"
#include "backends/cpu/helpers.h"
#include "inductor/kernel_disk_cache.h"

namespace kiln::runtime {

namespace fs = std::filesystem;

namespace {

template <class T>
T unwrap(llvm::Expected<T> v, const char* what) {
  if (!v) throw CompileError(fmt::format("LLVM JIT: {}: {}", what, llvm::toString(v.takeError())));
  return std::move(*v);
}
void check(llvm::Error e, const char* what) {
  if (e) throw CompileError(fmt::format("LLVM JIT: {}: {}", what, llvm::toString(std::move(e))));
}

// The code-generation options that change a kernel's code beyond its loop IR (docs/options.md: KILN_OWN_EXP,
// KILN_VECTOR_WIDTH), part of target_description() and so of every cache key: "" at their defaults.
std::string codegen_settings() {
  std::string out;
  if (!opt_bool(Opt::OwnExp)) out += " own_exp=0";
  if (int64_t width = opt_int(Opt::VectorWidth)) out += fmt::format(" vector_width={}", width);
  return out;
}

// Instructions of `m` that produce a vector (after optimisation: what the vectorisers made), for the cache log.
int64_t vector_instructions(const llvm::Module& m) {
  int64_t n = 0;
  for (const llvm::Function& f : m)
    for (const llvm::BasicBlock& bb : f)
      for (const llvm::Instruction& i : bb) n += i.getType()->isVectorTy();
  return n;
}

// KILN_VECTOR_WIDTH=N (N > 1): every loop of `m` asks the loop vectoriser for N lanes (llvm.loop.vectorize.width
// added to the loop's metadata, which the code generator's own hints may already hold).
void force_vector_width(llvm::Module& m, int64_t width) {
  llvm::LLVMContext& c = m.getContext();
  auto hint = [&](const char* name, llvm::Constant* value) {
    return llvm::MDNode::get(c, {llvm::MDString::get(c, name), llvm::ConstantAsMetadata::get(value)});
  };
  llvm::Type* i32 = llvm::Type::getInt32Ty(c);
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    llvm::DominatorTree dt(f);
    llvm::LoopInfo li(dt);
    for (llvm::Loop* loop : li.getLoopsInPreorder()) {
      std::vector<llvm::Metadata*> ops = {nullptr};
      if (llvm::MDNode* old = loop->getLoopID())
        for (unsigned i = 1; i < old->getNumOperands(); ++i) ops.push_back(old->getOperand(i));
      ops.push_back(hint("llvm.loop.vectorize.width", llvm::ConstantInt::get(i32, uint64_t(width))));
      ops.push_back(hint("llvm.loop.vectorize.enable", llvm::ConstantInt::getTrue(c)));
      llvm::MDNode* id = llvm::MDNode::getDistinct(c, ops);
      id->replaceOperandWith(0, id);
      loop->setLoopID(id);
    }
  }
}

// CPU time of the calling thread, in milliseconds (the kernel is compiled on it, under the JIT's lock).
double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

// The disk half of the kernel cache: object files, one directory per code-generator version.
const inductor::KernelDiskCache& disk_cache() {
  static const inductor::KernelDiskCache cache(fmt::format("kernels-v{}", kCodegenVersion), ".o");
  return cache;
}

// Makes the vector stores through pointers tagged kStreamMetadata non-temporal where their alignment is proven
// to cover the vector (codegen peels the loop so it is; the known bits come from the pointer's !align and the
// loop's start). After vectorisation because the vectoriser refuses to widen nontemporal scalar stores whose
// alignment it cannot prove. Returns how many stores it marked.
int mark_streaming_stores(llvm::Module& m) {
  llvm::LLVMContext& ctx = m.getContext();
  const unsigned kind = ctx.getMDKindID(kStreamMetadata);
  const llvm::DataLayout& dl = m.getDataLayout();
  llvm::MDNode* nontemporal =
      llvm::MDNode::get(ctx, {llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), 1))});
  int marked = 0;
  for (llvm::Function& f : m)
    for (llvm::BasicBlock& bb : f)
      for (llvm::Instruction& i : bb) {
        auto* st = llvm::dyn_cast<llvm::StoreInst>(&i);
        if (!st || !st->getValueOperand()->getType()->isVectorTy()) continue;
        auto* base = llvm::dyn_cast<llvm::Instruction>(llvm::getUnderlyingObject(st->getPointerOperand()));
        if (!base || !base->getMetadata(kind)) continue;
        uint64_t bytes = dl.getTypeStoreSize(st->getValueOperand()->getType());
        llvm::Align known = llvm::getKnownAlignment(st->getPointerOperand(), dl, st);
        if (known.value() < bytes) continue;
        st->setAlignment(std::max(st->getAlign(), known));
        st->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal);
        ++marked;
      }
  return marked;
}

// The passes every kernel's module goes through after LLVM's O2 pipeline, in order: the one place that says
// what kiln does to a kernel beyond LLVM's own pipeline. Each returns how many sites it changed (logged on
// `cache` with its description when non-zero).
struct KernelPostPass {
  const char* name;
  int (*run)(llvm::Module& m);
  const char* changed;  // what a changed site is, for the log
};
constexpr KernelPostPass kKernelPostPasses[] = {
    // kiln_expf's and the libmvec wrappers' versions inlined where the vectoriser called them (vector_math.h).
    {"inline_vector_math", [](llvm::Module& m) { return inline_vector_math(m), 0; }, "inlined vector math"},
    // NaN-insensitive maxima (softmax's stabilising max) as one max instruction (vector_math.h).
    {"lower_max_skipping_nan", lower_max_skipping_nan, "NaN-skipping vector max instructions"},
    // Stores of streamed buffers made non-temporal where their alignment is proven (above).
    {"mark_streaming_stores", mark_streaming_stores, "streaming (non-temporal) vector stores"},
};

}  // namespace

struct KernelJit::Impl {
  std::mutex mutex;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::unordered_map<std::string, KernelFn> memory;  // by key (SHA-256 hex)
  JitStats stats;
  std::string target;
  int64_t dylibs = 0;

  Impl() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    auto jtmb = unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host CPU");
    // Default (O2) code generation: Aggressive costs compile time (a headline number) for no measured gain.
    jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
    // Small code model, position-independent: constants are RIP-relative loads that the backend hoists out of
    // loops or folds into instructions (JITLink places an object's sections together and reaches libm through
    // stubs). The default here was the large model, whose 64-bit absolute constant addresses (movabs + load) kept
    // softmax's inlined exp reloading 10 constants per block of 4 vectors. PIC is required with it: without it an
    // indexed constant-pool load (a `where` between two constants picks from a table) takes a 32-bit absolute
    // address, which JIT memory above 2 GB cannot satisfy (JITLink: "out of range of Pointer32Signed fixup").
    jtmb.setCodeModel(llvm::CodeModel::Small);
    jtmb.setRelocationModel(llvm::Reloc::PIC_);
    tm = unwrap(jtmb.createTargetMachine(), "creating the target machine");
    target = fmt::format("{} {} O2", tm->getTargetTriple().str(), tm->getTargetCPU().str());
    wide_vectors = tm->getTargetFeatureString().contains("+avx512f");
    if (wide_vectors) target += " v512";  // part of the kernel cache key
    if (has_fast_vector_math()) target += " kexp";  // f32 e^x is kiln's own (runtime/vector_math.h)
    // JITLink (not RuntimeDyld) links the objects: it allocates an object's sections in one block and builds GOT
    // and PLT stubs for symbols out of reach, which the small code model relies on.
    jit = unwrap(llvm::orc::LLJITBuilder()
                     .setJITTargetMachineBuilder(jtmb)
                     .setObjectLinkingLayerCreator([](llvm::orc::ExecutionSession& es, const llvm::Triple&)
                                                       -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                       return std::make_unique<llvm::orc::ObjectLinkingLayer>(es);
                     })
                     .create(),
                 "creating LLJIT");
    llvm::orc::JITDylib& main = jit->getMainJITDylib();
    main.addGenerator(unwrap(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                                 jit->getDataLayout().getGlobalPrefix()),
                             "opening the process's symbols"));
    llvm::orc::SymbolMap helpers;
    for (const auto& [name, addr] : runtime_helpers())
      helpers[jit->mangleAndIntern(name)] = {llvm::orc::ExecutorAddr::fromPtr(addr),
                                             llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
    check(main.define(llvm::orc::absoluteSymbols(std::move(helpers))), "defining the runtime helpers");
    // glibc's vector math library (part of libc6): with it, kernels compute libm functions through its vector
    // variants (_ZGVeN16v_sinf), one per function on every code path (vector_math.h emit_libm_call). Optional:
    // without it the calls stay scalar libm calls.
    if (auto mvec = llvm::orc::DynamicLibrarySearchGenerator::Load("libmvec.so.1", jit->getDataLayout().getGlobalPrefix())) {
      main.addGenerator(std::move(*mvec));
      vector_math = true;
      // Part of the kernel cache key: the code calls them (and another glibc may lack some).
      target += fmt::format(" libmvec+{}", libmvec_variant_count());
    } else {
      llvm::consumeError(mvec.takeError());
    }
  }
  bool vector_math = false;

  bool wide_vectors = false;  // AVX-512 host: kernels prefer 512-bit vectors

  void optimize(llvm::Module& m) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    const int64_t width = opt_int(Opt::VectorWidth);  // 1: scalar code; N > 1: N lanes (force_vector_width)
    pto.LoopVectorization = width != 1;
    pto.SLPVectorization = width != 1;
    if (width > 1) force_vector_width(m, width);
    // No interleaving of vectorised loops: the bodies are long (fused chains), so the vector width alone keeps
    // the units busy, and interleaving would multiply the code LLVM must compile.
    pto.LoopInterleaving = false;
    llvm::PassBuilder pb(tm.get(), pto);
    // No vector library in the TargetLibraryInfo: libm calls reach the vectoriser as calls of kiln's wrappers,
    // whose variants the calls name (vector_math.h emit_libm_call), so body and remainder compute alike.
    llvm::TargetLibraryInfoImpl tlii(tm->getTargetTriple());
    fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    if (wide_vectors)
      for (llvm::Function& f : m)
        if (!f.isDeclaration()) f.addFnAttr("prefer-vector-width", "512");
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
    mpm.run(m, mam);
  }

  std::string emit_object(llvm::Module& m) {
    llvm::SmallVector<char, 0> buffer;
    llvm::raw_svector_ostream os(buffer);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
      throw CompileError("LLVM JIT: the target cannot emit object files");
    pm.run(m);
    return std::string(buffer.data(), buffer.size());
  }

  KernelFn load(const std::string& object, const std::string& symbol) {
    // Each object gets its own JITDylib (linked against the main one for libm and the helpers), so the same
    // kernel can be loaded again after the in-memory index was dropped.
    auto created = jit->createJITDylib(fmt::format("kiln_dylib_{}", dylibs++));
    if (!created) throw CompileError("LLVM JIT: creating a JITDylib: " + llvm::toString(created.takeError()));
    llvm::orc::JITDylib& jd = *created;
    jd.addToLinkOrder(jit->getMainJITDylib());
    check(jit->addObjectFile(jd, llvm::MemoryBuffer::getMemBufferCopy(object, symbol)), "loading a kernel object");
    auto addr = unwrap(jit->lookup(jd, symbol), "looking up a kernel");
    return addr.toPtr<KernelFn>();
  }
};

KernelJit& KernelJit::instance() {
  static KernelJit jit;
  return jit;
}

KernelJit::KernelJit() : impl_(std::make_unique<Impl>()) {}
KernelJit::~KernelJit() = default;

std::string KernelJit::target_description() const { return impl_->target + codegen_settings(); }
bool KernelJit::vector_math() const { return impl_->vector_math; }

JitStats KernelJit::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}
void KernelJit::reset_stats() {
  std::lock_guard lock(impl_->mutex);
  impl_->stats = {};
}
void KernelJit::forget_memory_cache() {
  std::lock_guard lock(impl_->mutex);
  impl_->memory.clear();
}

// One lookup of KernelJit::get: the kernel's key, and its steps in order (memory, disk, build, store).
struct KernelJit::Lookup {
  Impl& im;
  const std::function<void(llvm::Module&, const std::string&)>& build;
  std::string* ir_out;
  std::string key_material, key, symbol;

  Lookup(Impl& impl, const std::string& key_text, const std::string& target, const std::string& symbol_prefix,
         const std::function<void(llvm::Module&, const std::string&)>& b, std::string* ir)
      : im(impl), build(b), ir_out(ir) {
    KILN_ASSERT(target == im.target + codegen_settings(), "kernel JIT: asked for target '{}', but it compiles for '{}'",
                target, im.target + codegen_settings());
    // The build identity: the key text names the loop IR, not the machine code another build makes of it.
    key_material = fmt::format("{}\n{}\nv{}\n{}", key_text, target, kCodegenVersion, build_identity());
    key = sha256_hex(key_material);
    symbol = fmt::format("{}_{}", symbol_prefix, key.substr(0, 16));
  }

  std::unique_ptr<llvm::Module> fresh_module(llvm::LLVMContext& ctx) const {
    auto m = std::make_unique<llvm::Module>(symbol, ctx);
    m->setDataLayout(im.tm->createDataLayout());
    m->setTargetTriple(im.tm->getTargetTriple().str());
    return m;
  }
  void print_ir(const llvm::Module& m) const {
    ir_out->clear();
    llvm::raw_string_ostream os(*ir_out);
    m.print(os, nullptr);
  }
  // A cache hit still shows its LLVM IR when asked (KILN_LOGS=output_code, KILN_DEBUG_DIR): rebuilt, not compiled.
  void show_cached_ir() const {
    if (!ir_out) return;
    llvm::LLVMContext ctx;
    auto m = fresh_module(ctx);
    build(*m, symbol);
    print_ir(*m);
  }

  std::optional<KernelFn> from_memory() {
    auto it = im.memory.find(key);
    if (it == im.memory.end()) return std::nullopt;
    ++im.stats.memory_hits;
    show_cached_ir();
    return it->second;
  }

  // A verified disk entry, linked; a bad one is discarded (and nullopt returned, so the kernel is rebuilt).
  std::optional<KernelFn> from_disk() {
    std::optional<std::string> object = disk_cache().find(key, key_material);
    if (!object) return std::nullopt;
    try {
      KernelFn fn = im.load(*object, symbol);
      ++im.stats.disk_hits;
      im.memory[key] = fn;
      show_cached_ir();
      return fn;
    } catch (const CompileError& e) {
      disk_cache().discard(key, fmt::format("linking it failed: {}", e.what()));
      return std::nullopt;
    }
  }

  // Builds the kernel's module, verifies it, runs the O2 pipeline and the post-passes, emits its object (into
  // `object`) and links it.
  KernelFn compile_and_link(std::string& object) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    const double c0 = thread_cpu_ms();
    llvm::LLVMContext ctx;
    auto module = fresh_module(ctx);
    build(*module, symbol);
    std::string verify_errors;
    llvm::raw_string_ostream vos(verify_errors);
    if (llvm::verifyModule(*module, &vos)) {
      vos.flush();
      // The first line names the problem; the rest (block labels, the kernel's hashed name) varies between
      // otherwise equal failures, so it is left out (the minifier compares messages modulo names and numbers).
      throw CompileError(fmt::format("LLVM IR verification failed: {}", verify_errors.substr(0, verify_errors.find('\n'))));
    }
    if (ir_out) print_ir(*module);
    const auto t1 = Clock::now();
    const double c1 = thread_cpu_ms();
    im.optimize(*module);
    for (const KernelPostPass& pass : kKernelPostPasses) {
      const int changed = pass.run(*module);
      if (changed) KILN_LOG(LogChannel::Cache, "{}: {}: {} {}", symbol, pass.name, changed, pass.changed);
      if (pass.run == mark_streaming_stores) im.stats.streaming_stores += changed;
    }
    const auto t2 = Clock::now();
    const double c2 = thread_cpu_ms();
    object = im.emit_object(*module);
    const auto t3 = Clock::now();
    const double c3 = thread_cpu_ms();
    KernelFn fn = im.load(object, symbol);
    const double c4 = thread_cpu_ms();
    im.stats.build_cpu_ms += c1 - c0;
    im.stats.optimise_cpu_ms += c2 - c1;
    im.stats.emit_cpu_ms += c3 - c2;
    im.stats.link_cpu_ms += c4 - c3;
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    KILN_LOG(LogChannel::Cache, "built {}: IR {:.1f} ms, optimise {:.1f} ms, code generation {:.1f} ms, link {:.1f} ms; "
             "{} vector instructions", symbol, ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, Clock::now()),
             vector_instructions(*module));
    im.stats.compile_ms += ms(t0, Clock::now());
    ++im.stats.compiles;
    im.memory[key] = fn;
    return fn;
  }

  void store(const std::string& object) const { disk_cache().store(key, key_material, object, symbol); }
};

#if defined(__clang__)
__attribute__((no_sanitize("function")))
#endif
void call_kernel(KernelFn fn, char** buffers, int64_t begin, int64_t end, int32_t* status) {
  fn(buffers, begin, end, status);
}

KernelFn KernelJit::get(const std::string& key_text, const std::string& target, const std::string& symbol_prefix,
                        const std::function<void(llvm::Module&, const std::string&)>& build, std::string* ir_out) {
  std::lock_guard lock(impl_->mutex);
  Lookup lookup(*impl_, key_text, target, symbol_prefix, build, ir_out);
  if (std::optional<KernelFn> fn = lookup.from_memory()) return *fn;
  if (std::optional<KernelFn> fn = lookup.from_disk()) return *fn;
  std::string object;
  const KernelFn fn = lookup.compile_and_link(object);
  lookup.store(object);
  return fn;
}

}  // namespace kiln::runtime
