// CUDA C code generation (codegen_cuda.h): kernel shapes, index arithmetic, scalar expressions, reductions.
#include "backends/cuda/codegen_cuda.h"

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "backends/cuda/prelude.h"
#include "core/error.h"
#include "inductor/kernel_status.h"
#include "inductor/reciprocal.h"

namespace kiln::cuda {

using namespace inductor;

namespace {

// Rows kernels: about 8 elements of the longest loop per thread, between one warp and 1024 threads. Long rows get
// big blocks, which also keeps fewer rows in flight, so the second and third passes over a row (softmax's exp,
// its division) find it in L2.
constexpr int64_t kRowElementsPerThread = 8;
constexpr int kMaxRowsBlock = 1024;
constexpr int kFlatBlock = 256;
// Persistent rows: a row of at most kPersistentSlots * kMaxRowsBlock elements is held on chip, kPersistentSlots
// (or fewer) elements a thread, in registers indexed by the unrolled slot; at most kMaxCachedRegisters such
// registers a thread (what stays resident with 512-thread blocks at full unroll).
constexpr int kPersistentSlots = 16;
std::atomic<int> persistent_slots{kPersistentSlots};  // set_codegen_variant_for_benchmarks
std::atomic<bool> prefetch_next_row{false};  // measured slower on an H100 (docs/cuda.md)
constexpr int kMaxCachedRegisters = 64;
// Split reductions: a kernel of one reduction over rows of at least kSplitMinRow elements at no more than
// kSplitMaxOuter outer points spreads each row over up to kSplitMaxBlocks / outer blocks (kSplitRowPerThread
// elements a thread at least); each writes its partial, and the last block of a row to arrive combines them.
constexpr int64_t kSplitMinRow = 1 << 16;
constexpr int64_t kSplitMaxOuter = 64;
constexpr int64_t kSplitMaxBlocks = 1024;
constexpr int64_t kSplitRowPerThread = 16;

// The C type a value of compute dtype `dt` has in registers.
const char* compute_ctype(DType dt) {
  switch (compute_dtype_of(dt)) {
    case DType::Bool: return "bool";
    case DType::U8: return "unsigned char";
    case DType::I8: return "signed char";
    case DType::I16: return "short";
    case DType::I32: return "int";
    case DType::I64: return "i64";
    case DType::F32: return "float";
    case DType::F64: return "double";
    default: break;
  }
  internal_fail("cuda codegen: no compute type for {}", dtype_name(dt));
}

// The C type a buffer of dtype `dt` stores its elements as.
const char* storage_ctype(DType dt) {
  switch (dt) {
    case DType::F16: case DType::BF16: return "unsigned short";
    case DType::Bool: return "unsigned char";
    default: return compute_ctype(dt);
  }
}

std::string float_literal(double v, DType dt) {
  if (dt == DType::F64) return fmt::format("__longlong_as_double(0x{:016x}LL)", std::bit_cast<uint64_t>(v));
  return fmt::format("__int_as_float(0x{:08x})", std::bit_cast<uint32_t>(float(v)));
}

std::string int_literal(int64_t v) {
  if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
  return fmt::format("{}LL", v);
}

// |value| bound of an index expression, for the 32-bit decision: |constant| + sum |k| * max |atom|.
int64_t index_bound(const Index& ix) {
  __int128 b = ix.constant < 0 ? -__int128(ix.constant) : __int128(ix.constant);
  for (const auto& [atom, k] : ix.terms) {
    __int128 a = 0;
    if (atom->kind == IndexAtom::Kind::Var) a = atom->extent;
    else if (atom->kind == IndexAtom::Kind::Div) a = index_bound(atom->arg) / atom->divisor + 1;
    else a = std::max<__int128>(index_bound(atom->arg), atom->divisor);
    b += (k < 0 ? -__int128(k) : __int128(k)) * a;
    if (b > INT64_MAX / 4) return INT64_MAX / 4;
  }
  return int64_t(b);
}

// `ix` as text with the variables of `rename` renamed and its terms sorted: two loops of a persistent row compare
// what they load and store as functions of the row element, whatever their own variables are called.
std::string canonical_index(const Index& ix, const std::map<std::string, std::string>& rename) {
  std::vector<std::string> terms;
  for (const auto& [atom, k] : ix.terms) {
    std::string a;
    if (atom->kind == IndexAtom::Kind::Var) a = rename.count(atom->key) ? rename.at(atom->key) : atom->key;
    else a = fmt::format("({}){}{}", canonical_index(atom->arg, rename), atom->kind == IndexAtom::Kind::Div ? "//" : "%", atom->divisor);
    terms.push_back(fmt::format("{}*{}", k, a));
  }
  std::sort(terms.begin(), terms.end());
  std::string r = std::to_string(ix.constant);
  for (const std::string& t : terms) r += "+" + t;
  return r;
}

void index_exprs(const SExpr& e, std::vector<Index>& out) {
  if (e->op == SOp::Load || e->op == SOp::IndexValue) out.push_back(e->index);
  for (const SExpr& a : e->args) index_exprs(a, out);
}

class Emitter {
 public:
  Emitter(const Kernel& k, const LoweredGraph& lg, const std::vector<int>& args, const LaunchChoice& choice)
      : k_(k), lg_(lg), args_(args), choice_(choice) {
    for (size_t i = 0; i < args.size(); ++i) slot_[args[i]] = int(i);
  }

  CudaKernel emit() {
    if (k_.deferred_host >= 0)
      throw CompileError(fmt::format("cuda codegen: kernel {} uses deferred writes, which the CUDA backend's target "
                                     "never asks for", k_.name), "inductor/codegen", true);
    CudaKernel out;
    out_ = &out;
    out.entry = "kiln_kernel";
    const LoopNode& first = lg_.nodes[size_t(k_.loops.front().node)];
    out.rows = !(k_.loops.size() == 1 && first.kind == LoopNode::Kind::Pointwise);
    out.work = out.rows ? shape_numel(k_.outer) : shape_numel(first.sizes);
    if (out.rows && choice_.persistent) persistent_ = plan_persistent();
    if (out.rows && !persistent_) split_ = plan_split();
    if (split_) {
      out.split = split_;
      out.work *= split_;
    }
    out.block = persistent_ ? persistent_->block : out.rows ? rows_block() : choice_.block > 0 ? choice_.block : kFlatBlock;
    out.persistent = persistent_.has_value();
    for (int b : k_.local_buffers)
      if (!persistent_ || !persistent_->register_locals.count(b)) shared_locals_.insert(b);
    out.index32 = fits_32_bits(out);
    spans(out);
    body_ << "extern \"C\" __global__ void __launch_bounds__(" << out.block << ") " << out.entry << "(";
    for (size_t i = 0; i < args_.size(); ++i)
      body_ << storage_ctype(lg_.buffers[size_t(args_[i])].dtype) << "* __restrict__ b" << i << ", ";
    body_ << "int* __restrict__ status" << (split_ ? ", unsigned char* __restrict__ workspace" : "") << ") {\n";
    if (split_) line("__shared__ bool kiln_last_block;");
    if (!shared_locals_.empty()) line("extern __shared__ __align__(16) unsigned char kiln_shared[];");
    for (int b : shared_locals_) {  // each kernel-local row not held in registers: a row of dynamic shared memory
      const char* t = storage_ctype(lg_.buffers[size_t(b)].dtype);
      line(fmt::format("{0}* __restrict__ l{1} = reinterpret_cast<{0}*>(kiln_shared + {2});", t, b, out.shared_bytes));
      out.shared_bytes += (local_row_elements(b) * dtype_size(lg_.buffers[size_t(b)].dtype) + 15) / 16 * 16;
    }
    if (out.rows) emit_rows(out);
    else emit_flat(out);
    body_ << "}\n";
    out.source = fmt::format("// kernel {} (generated by kiln's CUDA backend)\n{}typedef {} idx_t;\n{}", k_.name,
                             prelude(), out.index32 ? "int" : "i64", body_.str());
    return out;
  }

 private:
  const Kernel& k_;
  const LoweredGraph& lg_;
  const std::vector<int>& args_;
  const LaunchChoice choice_;
  std::map<int, int> slot_;
  std::ostringstream body_;
  std::unordered_map<std::string, std::string> vars_;                  // index variable key -> C name
  std::unordered_map<const SNode*, std::string> memo_;                 // emitted values of the current element
  std::map<int, std::pair<std::string, std::string>> registers_;       // buffer -> (index, value) of this outer point
  std::string acc_;                                                    // the accumulator in a finalize expression
  struct VectorLane {
    const void* plan;  // VectorPlan of the element being emitted
    int lane;
    Index linear;
  };
  std::optional<VectorLane> vector_;                                   // set while a vector lane's element is emitted
  int next_ = 0;
  std::string indent_ = "  ";

  // Persistent rows: every loop of a rows kernel runs over the same row shape, short enough to keep on chip; each
  // thread handles the row elements threadIdx.x + s * block for the unrolled slots s, in every loop, so what one
  // loop loads or stores at an element, a later loop finds in the same thread's register array at slot s.
  struct RowCache {
    std::string array;  // the register array, one element a slot
    DType dtype;        // the buffer's
    int first_loop;     // the loop that fills it (loads or stores); later loops read it
    bool per_slot;      // an array of a register a slot; else one register (the element is the same in every slot)
    std::string at() const { return per_slot ? array + "[s]" : array; }
  };
  struct PersistentPlan {
    int block = 0, slots = 0;
    int64_t row = 0;
    std::map<std::string, RowCache> cache;  // by row_key
    std::set<int> register_locals;          // kernel-local buffers that live only in the cache
  };
  std::optional<PersistentPlan> persistent_;
  std::set<int> shared_locals_;                   // kernel-local buffers in a shared-memory row
  std::map<std::string, std::string> rename_;    // the current loop's row variables -> p0, p1, ...
  int loop_ = -1;                                 // the loop being emitted
  int64_t split_ = 0;                             // split reduction: blocks a row (0: not split)
  std::vector<Index> element_vars_;               // the variables the current element loop runs over
  CudaKernel* out_ = nullptr;

  static std::string prelude() {
    std::string p = kCudaPrelude;
    const std::string marker = "%ZERO_DIVISION%";
    p.replace(p.find(marker), marker.size(), std::to_string(int(kStatusZeroDivision)));
    return p;
  }

  std::string fresh(const char* prefix) { return fmt::format("{}{}", prefix, next_++); }
  void line(const std::string& s) { body_ << indent_ << s << "\n"; }
  void open(const std::string& s) {
    line(s + " {");
    indent_ += "  ";
  }
  void close() {
    indent_.resize(indent_.size() - 2);
    line("}");
  }

  const LoopNode& node(const KernelLoop& l) const { return lg_.nodes[size_t(l.node)]; }
  bool is_local(int buffer) const {
    return std::find(k_.local_buffers.begin(), k_.local_buffers.end(), buffer) != k_.local_buffers.end();
  }

  // A loop's row: its variables past the outer nest (a pointwise loop's inner dims, a reduction's reduced dims).
  std::pair<std::vector<Index>, Shape> row_of(const KernelLoop& l) const {
    const LoopNode& n = node(l);
    if (n.kind == LoopNode::Kind::Reduction) return {l.ridx, n.rsizes};
    const auto outer = int64_t(k_.outer_vars.size());
    return {std::vector<Index>(l.idx.begin() + outer, l.idx.end()), Shape(n.sizes.begin() + outer, n.sizes.end())};
  }
  static std::map<std::string, std::string> row_renaming(const std::vector<Index>& vars) {
    std::map<std::string, std::string> r;
    for (size_t d = 0; d < vars.size(); ++d)
      if (!vars[d].is_constant()) r[vars[d].terms[0].first->key] = fmt::format("p{}", d);
    return r;
  }
  static std::string row_key(int buffer, const Index& ix, const std::map<std::string, std::string>& rename) {
    return fmt::format("b{}:{}", buffer, canonical_index(ix, rename));
  }
  int64_t local_row_elements(int buffer) const {
    const Buffer& b = lg_.buffers[size_t(buffer)];
    return shape_numel(b.sizes) / std::max<int64_t>(1, shape_numel(Shape(b.sizes.begin(), b.sizes.begin() + int64_t(k_.outer.size()))));
  }

  // The persistent-row plan when every loop runs over the same row of at most kPersistentSlots * 1024 elements:
  // which (buffer, element) pairs two or more loops touch are kept in registers (as many as kMaxCachedRegisters
  // allows, earliest first), and which kernel-local buffers then never need memory.
  std::optional<PersistentPlan> plan_persistent() const {
    Shape row;
    for (size_t i = 0; i < k_.loops.size(); ++i) {
      Shape sizes = row_of(k_.loops[i]).second;
      if (i == 0) row = sizes;
      else if (sizes != row) return std::nullopt;
    }
    PersistentPlan p;
    p.row = shape_numel(row);
    const int slots = choice_.persistent_slots > 0 ? choice_.persistent_slots : persistent_slots.load();
    if (p.row == 0 || p.row > int64_t(slots) * kMaxRowsBlock) return std::nullopt;
    p.block = 32;
    while (p.block < kMaxRowsBlock && int64_t(p.block) * slots < p.row) p.block *= 2;
    p.slots = int((p.row + p.block - 1) / p.block);
    std::set<int> reduced;  // reduction results stay in registers_ (one value a row), never in the cache
    for (const KernelLoop& l : k_.loops)
      if (node(l).kind == LoopNode::Kind::Reduction) reduced.insert(node(l).buffer);
    std::map<std::string, std::set<int>> loops_of;
    std::map<std::string, int> buffer_of;
    std::map<std::string, bool> per_slot;  // whether the element depends on the row
    std::map<int, std::set<std::string>> local_keys;  // every key a kernel-local buffer is touched at
    for (size_t i = 0; i < k_.loops.size(); ++i) {
      const KernelLoop& l = k_.loops[i];
      const auto rename = row_renaming(row_of(l).first);
      std::vector<std::pair<int, Index>> touched;
      s_loads(l.value, touched);
      if (node(l).kind == LoopNode::Kind::Pointwise) touched.push_back({node(l).buffer, ix_linear(l.idx, node(l).sizes)});
      for (const auto& [b, ix] : touched) {
        if (b < 0 || reduced.count(b)) continue;
        const std::string key = row_key(b, ix, rename);
        loops_of[key].insert(int(i));
        buffer_of[key] = b;
        per_slot[key] = key.find("*p") != std::string::npos;
        if (is_local(b)) local_keys[b].insert(key);
      }
    }
    std::vector<std::pair<int, std::string>> shared;  // (first loop, key) of what two or more loops touch
    for (const auto& [key, loops] : loops_of)
      if (loops.size() >= 2) shared.push_back({*loops.begin(), key});
    std::sort(shared.begin(), shared.end());
    int64_t registers = 0;
    for (const auto& [first, key] : shared) {
      const int64_t cost = per_slot[key] ? p.slots : 1;
      if (registers + cost > kMaxCachedRegisters) continue;
      registers += cost;
      p.cache[key] = {fmt::format("c{}", p.cache.size()), lg_.buffers[size_t(buffer_of[key])].dtype, first, per_slot[key]};
    }
    for (const auto& [b, keys] : local_keys)
      if (keys.size() == 1 && p.cache.count(*keys.begin())) p.register_locals.insert(b);
    return p;
  }

  // The blocks per row of a split reduction (0: the kernel is not one; see kSplitMinRow).
  int64_t plan_split() const {
    if (k_.loops.size() != 1 || !k_.local_buffers.empty()) return 0;
    const LoopNode& n = node(k_.loops[0]);
    if (n.kind != LoopNode::Kind::Reduction || n.reduce == ReduceOp::ArgMax || n.reduce == ReduceOp::ArgMin) return 0;
    const int64_t outer = std::max<int64_t>(1, shape_numel(k_.outer)), row = shape_numel(n.rsizes);
    if (outer > kSplitMaxOuter || row < kSplitMinRow) return 0;
    return std::clamp<int64_t>(row / (int64_t(kMaxRowsBlock) * kSplitRowPerThread), 2, std::max<int64_t>(2, kSplitMaxBlocks / outer));
  }

  // Whether loop `i` of a persistent row must wait for the whole block first: it reads from memory something an
  // earlier loop of this row wrote (not from the register cache, nor a reduction's result register).
  bool reads_earlier_writes_from_memory(size_t i) const {
    std::map<int, std::string> written;  // buffer -> where a reduction keeps its result in a register ("": none)
    for (size_t j = 0; j < i; ++j) {
      const LoopNode& n = node(k_.loops[j]);
      written[n.buffer] = n.kind == LoopNode::Kind::Reduction ? ix_linear(k_.loops[j].idx, n.sizes).str() : "";
    }
    const auto rename = row_renaming(row_of(k_.loops[i]).first);
    std::vector<std::pair<int, Index>> loads;
    s_loads(k_.loops[i].value, loads);
    for (const auto& [b, ix] : loads) {
      auto w = written.find(b);
      if (w == written.end() || (!w->second.empty() && w->second == ix.str())) continue;
      auto c = persistent_->cache.find(row_key(b, ix, rename));
      if (c == persistent_->cache.end() || c->second.first_loop >= int(i)) return true;
    }
    return false;
  }

  // Persistent rows with one outer variable: the first loop's row reads of the next outer point this block runs
  // (o + gridDim.x) are prefetched into L2 while this one computes, so its loads find them there.
  void prefetch_next_rows(const CudaKernel& out) {
    std::vector<Index> outer;
    for (const Index& v : k_.outer_vars)
      if (!v.is_constant()) outer.push_back(v);
    if (outer.size() != 1) return;
    const KernelLoop& l = k_.loops.front();
    const auto [vars, sizes] = row_of(l);
    std::vector<std::pair<int, Index>> loads, rows;
    s_loads(l.value, loads);
    std::set<std::string> seen;
    for (const auto& [b, ix] : loads) {
      const int64_t k = ix_coefficient(ix, outer[0]);
      bool row_read = k != 0 && b >= 0 && slot_.count(b);
      for (const auto& [atom, c] : ix.terms)
        row_read &= atom->kind == IndexAtom::Kind::Var || !ix_depends_on(atom->arg, outer[0]);  // linear in o
      if (row_read && seen.insert(fmt::format("{}:{}", b, ix.str())).second) rows.push_back({b, ix});
    }
    if (rows.empty()) return;
    open(fmt::format("if (o + (idx_t)gridDim.x < (idx_t){})", out.work));
    open_row_loop("r", shape_numel(sizes));
    unravel(vars, sizes, "r");
    for (const auto& [b, ix] : rows)
      line(fmt::format("kiln_prefetch_l2(b{} + ({}) + (idx_t){} * (idx_t)gridDim.x);", slot_.at(b), index(ix),
                       ix_coefficient(ix, outer[0])));
    close_row_loop();
    close();
  }

  // Opens the loop of the current outer point over its row's elements, `var` the row-linear element index: a
  // block-strided loop, or with a persistent plan the unrolled slots.
  void open_row_loop(const std::string& var, int64_t extent) {
    if (split_) {  // this block's share of the row: every split_-th block-wide stretch from its part's
      open(fmt::format("for (idx_t {0} = part * (idx_t)blockDim.x + threadIdx.x; {0} < (idx_t){1}; {0} += (idx_t){2} * blockDim.x)",
                       var, extent, split_));
      return;
    }
    if (!persistent_) {
      open(fmt::format("for (idx_t {0} = threadIdx.x; {0} < (idx_t){1}; {0} += blockDim.x)", var, extent));
      return;
    }
    line("#pragma unroll");
    open(fmt::format("for (int s = 0; s < {}; ++s)", persistent_->slots));
    line(fmt::format("const idx_t {} = (idx_t)threadIdx.x + (idx_t)(s * {});", var, persistent_->block));
    if (int64_t(persistent_->slots) * persistent_->block != extent) open(fmt::format("if ({} < (idx_t){})", var, extent));
  }
  void close_row_loop() {
    if (persistent_ && int64_t(persistent_->slots) * persistent_->block != persistent_->row) close();
    close();
  }
  const RowCache* cached(int buffer, const Index& ix) const {
    if (!persistent_ || buffer < 0) return nullptr;
    auto it = persistent_->cache.find(row_key(buffer, ix, rename_));
    return it == persistent_->cache.end() ? nullptr : &it->second;
  }

  int rows_block() const {
    if (choice_.block > 0) return choice_.block;
    int64_t longest = 1;
    for (const KernelLoop& l : k_.loops) {
      const LoopNode& n = lg_.nodes[size_t(l.node)];
      const int64_t inner = n.kind == LoopNode::Kind::Reduction ? shape_numel(n.rsizes) : shape_numel(n.sizes) / std::max<int64_t>(1, shape_numel(k_.outer));
      longest = std::max(longest, inner);
    }
    int block = 32;
    while (block < kMaxRowsBlock && int64_t(block) * kRowElementsPerThread < longest) block *= 2;
    return block;
  }

  // Every load, store and index value of the kernel, its loop bounds and the grid-stride counters in 32 bits.
  bool fits_32_bits(const CudaKernel& out) const {
    constexpr int64_t kLimit = int64_t(1) << 30;
    std::vector<Index> ixs;
    int64_t extents = out.work * 2;
    for (const KernelLoop& l : k_.loops) {
      const LoopNode& n = lg_.nodes[size_t(l.node)];
      index_exprs(l.value, ixs);
      ixs.push_back(ix_linear(l.idx, n.sizes));
      if (n.kind == LoopNode::Kind::Reduction) ixs.push_back(ix_linear(l.ridx, n.rsizes));
      extents = std::max({extents, 2 * shape_numel(n.sizes), 2 * shape_numel(n.rsizes)});
    }
    if (extents >= kLimit) return false;
    for (const Index& ix : ixs)
      if (index_bound(ix) >= kLimit) return false;
    return true;
  }

  void spans(CudaKernel& out) const {
    out.spans.assign(args_.size(), {INT64_MAX, INT64_MIN});
    out.written.assign(args_.size(), false);
    auto touch = [&](int buffer, const Index& ix) {
      auto it = slot_.find(buffer);
      if (it == slot_.end()) return;
      auto [lo, hi] = ix_range(ix);
      auto& s = out.spans[size_t(it->second)];
      s = {std::min(s.first, lo), std::max(s.second, hi)};
    };
    for (const KernelLoop& l : k_.loops) {
      const LoopNode& n = lg_.nodes[size_t(l.node)];
      const bool empty = shape_numel(n.sizes) == 0 || (n.kind == LoopNode::Kind::Reduction && shape_numel(n.rsizes) == 0);
      std::vector<std::pair<int, Index>> loads;
      s_loads(l.value, loads);
      if (!empty)
        for (const auto& [b, ix] : loads) touch(b, ix);
      if (shape_numel(n.sizes) > 0) touch(n.buffer, ix_linear(l.idx, n.sizes));
      if (auto it = slot_.find(n.buffer); it != slot_.end()) out.written[size_t(it->second)] = true;
    }
  }

  // ---- index arithmetic
  std::string index(const Index& ix) {
    std::string r = fmt::format("(idx_t){}", ix.constant);
    if (ix.constant == 0 && !ix.terms.empty()) r.clear();
    for (const auto& [atom, k] : ix.terms) {
      std::string a;
      if (atom->kind == IndexAtom::Kind::Var) a = vars_.at(atom->key);
      else a = fmt::format("(({}) {} (idx_t){})", index(atom->arg), atom->kind == IndexAtom::Kind::Div ? "/" : "%",
                           atom->divisor);
      std::string term = k == 1 ? a : fmt::format("(idx_t){} * {}", k, a);
      r = r.empty() ? term : r + " + " + term;
    }
    return r;
  }

  // Binds the non-constant variables of `vars` (extents `sizes`) from the row-major linear index `linear`.
  void unravel(const std::vector<Index>& vars, const Shape& sizes, const std::string& linear) {
    std::string rem = linear;
    for (size_t d = vars.size(); d-- > 0;) {
      if (vars[d].is_constant()) continue;
      const std::string name = fresh("x");
      vars_[vars[d].terms[0].first->key] = name;
      bool outermost = true;
      for (size_t e = 0; e < d; ++e) outermost &= vars[e].is_constant();
      if (outermost) {
        line(fmt::format("const idx_t {} = {};", name, rem));
      } else {
        line(fmt::format("const idx_t {} = {} % (idx_t){};", name, rem, sizes[d]));
        const std::string next = fresh("q");
        line(fmt::format("const idx_t {} = {} / (idx_t){};", next, rem, sizes[d]));
        rem = next;
      }
    }
  }

  // ---- values
  std::string cast(const std::string& v, DType from, DType to) {
    from = compute_dtype_of(from);
    to = compute_dtype_of(to);
    if (from == to) return v;
    if (to == DType::Bool) return fmt::format("({} != 0)", v);
    if (is_floating(to) || !is_floating(from)) return fmt::format("(({}){})", compute_ctype(to), v);
    if (to == DType::I64) return fmt::format("kiln_f2i64((double){})", v);
    return fmt::format("(({})kiln_f2i32((double){}))", compute_ctype(to), v);
  }
  static std::string to_storage(const std::string& v, DType dt) {
    if (dt == DType::F16) return fmt::format("kiln_f2h({})", v);
    if (dt == DType::BF16) return fmt::format("kiln_f2bf({})", v);
    if (dt == DType::Bool) return fmt::format("(unsigned char)({})", v);
    return v;
  }
  static std::string from_storage(const std::string& v, DType dt) {
    if (dt == DType::F16) return fmt::format("kiln_h2f({})", v);
    if (dt == DType::BF16) return fmt::format("kiln_bf2f({})", v);
    if (dt == DType::Bool) return fmt::format("({} != 0)", v);
    return v;
  }
  std::string element(int buffer, const Index& ix) {
    if (shared_locals_.count(buffer)) {  // the current outer point's row: drop the outer variables' part
      const Buffer& buf = lg_.buffers[size_t(buffer)];
      Index row = ix;
      for (size_t d = 0; d < k_.outer_vars.size(); ++d)
        if (!k_.outer_vars[d].is_constant()) row = ix_add(row, ix_scale(k_.outer_vars[d], -buf.strides[d]));
      return fmt::format("l{}[{}]", buffer, index(row));
    }
    return fmt::format("b{}[{}]", slot_.at(buffer), index(ix));
  }
  std::string load(int buffer, const Index& ix) {
    auto reg = registers_.find(buffer);
    if (reg != registers_.end() && reg->second.first == ix.str()) return reg->second.second;
    if (const RowCache* c = cached(buffer, ix)) {
      if (c->first_loop < loop_) return c->at();
      const std::string v = fresh("v");  // the first loop to touch it: load it and keep it
      line(fmt::format("const {} {} = {};", compute_ctype(c->dtype), v, from_storage(element(buffer, ix), c->dtype)));
      line(fmt::format("{} = {};", c->at(), v));
      return v;
    }
    if (vector_) {  // a contiguous load of a vectorised flat kernel: its lane of the 128-bit load
      const auto& loads = static_cast<const VectorPlan*>(vector_->plan)->loads;
      const Index d = ix_add(ix, ix_scale(vector_->linear, -1));
      if (d.is_constant())
        if (auto it = loads.find({buffer, d.constant}); it != loads.end()) {
          static const char* lanes[] = {"x", "y", "z", "w"};
          return from_storage(fmt::format("{}.{}", it->second, lanes[vector_->lane]), lg_.buffers[size_t(buffer)].dtype);
        }
    }
    return from_storage(element(buffer, ix), lg_.buffers[size_t(buffer)].dtype);
  }
  void store(int buffer, const Index& ix, const std::string& v, DType v_dtype) {
    const DType dt = lg_.buffers[size_t(buffer)].dtype;
    if (const RowCache* c = cached(buffer, ix)) {
      line(fmt::format("{} = {};", c->at(), from_storage(to_storage(cast(v, v_dtype, dt), dt), dt)));
      if (persistent_->register_locals.count(buffer)) return;
    }
    line(fmt::format("{} = {};", element(buffer, ix), to_storage(cast(v, v_dtype, dt), dt)));
  }

  static std::string math(const char* f32_name, DType dt, const std::string& args) {
    std::string name = f32_name;
    if (dt == DType::F64) name.pop_back();  // expf -> exp
    return fmt::format("{}({})", name, args);
  }

  std::string unary(SOp op, const std::string& x, DType dt) {
    const bool fl = is_floating(dt);
    switch (op) {
      case SOp::Neg: return fl ? fmt::format("(-{})", x) : fmt::format("(({})kiln_wrap_sub(0, (i64){}))", compute_ctype(dt), x);
      case SOp::Abs:
        if (fl) return math("fabsf", dt, x);
        return fmt::format("({0} < 0 ? ({1})kiln_wrap_sub(0, (i64){0}) : {0})", x, compute_ctype(dt));
      case SOp::Exp: return math("expf", dt, x);
      case SOp::Exp2: return math("exp2f", dt, x);
      case SOp::Log: return math("logf", dt, x);
      case SOp::Log2: return math("log2f", dt, x);
      case SOp::Log1p: return math("log1pf", dt, x);
      case SOp::Expm1: return math("expm1f", dt, x);
      case SOp::Sqrt: return math("sqrtf", dt, x);
      case SOp::Sin: return math("sinf", dt, x);
      case SOp::Cos: return math("cosf", dt, x);
      case SOp::Tan: return math("tanf", dt, x);
      case SOp::Tanh: return math("tanhf", dt, x);
      case SOp::Asin: return math("asinf", dt, x);
      case SOp::Acos: return math("acosf", dt, x);
      case SOp::Atan: return math("atanf", dt, x);
      case SOp::Sinh: return math("sinhf", dt, x);
      case SOp::Cosh: return math("coshf", dt, x);
      case SOp::Erf: return math("erff", dt, x);
      case SOp::Floor: return math("floorf", dt, x);
      case SOp::Ceil: return math("ceilf", dt, x);
      case SOp::RoundEven: return math("rintf", dt, x);
      case SOp::Trunc: return math("truncf", dt, x);
      case SOp::IsNan: return fmt::format("({0} != {0})", x);
      case SOp::IsInf: return fmt::format("({} == {})", math("fabsf", dt, x), float_literal(INFINITY, dt));
      case SOp::Not: return fmt::format("(!{})", x);
      default: break;
    }
    internal_fail("cuda codegen: {} is not a unary op", sop_name(op));
  }

  std::string binary(SOp op, const std::string& x, const std::string& y, DType dt) {
    const bool fl = is_floating(dt);
    const bool wraps = !fl && dt != DType::Bool;
    auto wrap = [&](const char* f) { return fmt::format("(({})kiln_wrap_{}((i64){}, (i64){}))", compute_ctype(dt), f, x, y); };
    auto infix = [&](const char* o) { return fmt::format("({} {} {})", x, o, y); };
    switch (op) {
      case SOp::Add: return wraps ? wrap("add") : infix("+");
      case SOp::Sub: return wraps ? wrap("sub") : infix("-");
      case SOp::Mul: return wraps ? wrap("mul") : infix("*");
      case SOp::Div: return infix("/");
      case SOp::Max: return fl ? fmt::format("kiln_maximum({}, {})", x, y) : fmt::format("({0} < {1} ? {1} : {0})", x, y);
      case SOp::Min: return fl ? fmt::format("kiln_minimum({}, {})", x, y) : fmt::format("({1} < {0} ? {1} : {0})", x, y);
      case SOp::Pow: return math("powf", dt, x + ", " + y);
      case SOp::Atan2: return math("atan2f", dt, x + ", " + y);
      case SOp::Eq: return infix("==");
      case SOp::Ne: return infix("!=");
      case SOp::Lt: return infix("<");
      case SOp::Le: return infix("<=");
      case SOp::Gt: return infix(">");
      case SOp::Ge: return infix(">=");
      case SOp::And: return infix("&");
      case SOp::Or: return infix("|");
      case SOp::Xor: return infix("^");
      default: break;
    }
    internal_fail("cuda codegen: {} is not a binary op", sop_name(op));
  }

  // The expression's value as a named local of the current element (memoised).
  std::string value(const SExpr& e) {
    if (auto it = memo_.find(e.get()); it != memo_.end()) return it->second;
    const DType dt = e->dtype;
    std::string v;
    switch (e->op) {
      case SOp::Const: v = is_floating(dt) ? float_literal(e->fvalue, dt) : fmt::format("({}){}", compute_ctype(dt), int_literal(e->ivalue)); break;
      case SOp::Load: v = e->buffer == kAccumulatorBuffer ? acc_ : load(e->buffer, e->index); break;
      case SOp::IndexValue: v = fmt::format("(i64)({})", index(e->index)); break;
      case SOp::Cast: v = cast(value(e->args[0]), e->args[0]->dtype, dt); break;
      case SOp::RoundTo: {
        const DType narrow = DType(e->ivalue);
        v = from_storage(to_storage(value(e->args[0]), narrow), narrow);
        break;
      }
      case SOp::Where: v = fmt::format("({} ? {} : {})", value(e->args[0]), value(e->args[1]), value(e->args[2])); break;
      case SOp::MulAdd:
        v = math("fmaf", dt, fmt::format("{}, {}, {}", value(e->args[0]), value(e->args[1]), value(e->args[2])));
        break;
      case SOp::Helper: {
        std::string args;
        for (const SExpr& a : e->args) args += value(a) + ", ";
        v = fmt::format("{}({}status)", e->helper, args);
        break;
      }
      case SOp::Trap:  // an injected crash: a write to an unmapped address
        v = value(e->args[0]);
        line("*(volatile int*)8 = 0;");
        break;
      case SOp::Fail:  // a reported runtime error: the first code set sticks; the host reports it
        v = value(e->args[0]);
        line(fmt::format("kiln_report(status, {});", e->ivalue));
        break;
      case SOp::Invalid:  // an injected compile error: NVRTC rejects the undeclared name
        v = value(e->args[0]);
        line("kiln_injected_compile_error;");
        break;
      default:
        if (e->args.size() == 1) v = unary(e->op, value(e->args[0]), e->args[0]->dtype);
        else if (divides_by_reciprocal(e, element_vars_))  // inductor/reciprocal.h
          v = fmt::format("({} * ({} / {}))", value(e->args[0]), float_literal(1.0, compute_dtype_of(e->args[1]->dtype)),
                          value(e->args[1]));
        else v = binary(e->op, value(e->args[0]), value(e->args[1]), e->args[0]->dtype);
        break;
    }
    if (e->op == SOp::Const || (e->op == SOp::Load && e->buffer == kAccumulatorBuffer)) return memo_[e.get()] = v;
    const std::string name = fresh("v");
    line(fmt::format("const {} {} = {};", compute_ctype(dt), name, v));
    return memo_[e.get()] = name;
  }

  // ---- kernel shapes
  // A flat kernel's loads and store that are contiguous in its linear element index (index = linear + c) over
  // 4-byte elements: with every such address 16-byte aligned (checked at run time) and the element count a
  // multiple of 4, each thread handles 4 consecutive elements per step through 128-bit loads and stores.
  struct VectorPlan {
    std::map<std::pair<int, int64_t>, std::string> loads;  // (buffer, c) -> its vector's name
    bool store = false;
  };
  std::optional<VectorPlan> vector_plan(const KernelLoop& l, const LoopNode& n, int64_t work) const {
    if (work % 4 != 0 || dtype_size(lg_.buffers[size_t(n.buffer)].dtype) != 4) return std::nullopt;
    const Index linear = ix_linear(l.idx, n.sizes);
    VectorPlan plan;
    plan.store = true;
    std::vector<std::pair<int, Index>> loads;
    s_loads(l.value, loads);
    int next = 0;
    for (const auto& [b, ix] : loads) {
      if (b < 0 || dtype_size(lg_.buffers[size_t(b)].dtype) != 4) continue;
      const Index d = ix_add(ix, ix_scale(linear, -1));
      if (!d.is_constant()) continue;
      if (!plan.loads.count({b, d.constant})) plan.loads[{b, d.constant}] = fmt::format("w{}", next++);
    }
    return plan;
  }

  static std::string vector_type(DType dt) { return dt == DType::F32 ? "float4" : "int4"; }

  void emit_flat(const CudaKernel& out) {
    const KernelLoop& l = k_.loops.front();
    const LoopNode& n = lg_.nodes[size_t(l.node)];
    const Index linear = ix_linear(l.idx, n.sizes);
    element_vars_ = l.idx;
    const std::string stride = "(idx_t)gridDim.x * blockDim.x", first = "(idx_t)blockIdx.x * blockDim.x + threadIdx.x";
    std::optional<VectorPlan> plan = vector_plan(l, n, out.work);
    if (plan) {
      std::string aligned = fmt::format("(unsigned long long)b{}", slot_.at(n.buffer));
      for (const auto& [key, name] : plan->loads)
        aligned += fmt::format(" | (unsigned long long)(b{} + {})", slot_.at(key.first), key.second);
      open(fmt::format("if ((({}) & 15) == 0)", aligned));
      open(fmt::format("for (idx_t e4 = {}; e4 < (idx_t){}; e4 += {})", first, out.work / 4, stride));
      line("const idx_t e0 = e4 * 4;");
      for (const auto& [key, name] : plan->loads)
        line(fmt::format("const {0} {1} = *reinterpret_cast<const {0}*>(b{2} + e0 + {3});",
                         vector_type(lg_.buffers[size_t(key.first)].dtype), name, slot_.at(key.first), key.second));
      const DType out_dt = lg_.buffers[size_t(n.buffer)].dtype;
      line(fmt::format("{} st;", vector_type(out_dt)));
      static const char* lanes[] = {"x", "y", "z", "w"};
      for (int lane = 0; lane < 4; ++lane) {
        open("");
        line(fmt::format("const idx_t e = e0 + {};", lane));
        unravel(l.idx, n.sizes, "e");
        memo_.clear();
        vector_ = VectorLane{&*plan, lane, linear};
        const std::string v = value(l.value);
        vector_.reset();
        line(fmt::format("st.{} = {};", lanes[lane], to_storage(cast(v, l.value->dtype, out_dt), out_dt)));
        close();
      }
      line(fmt::format("*reinterpret_cast<{}*>(b{} + e0) = st;", vector_type(out_dt), slot_.at(n.buffer)));
      close();
      memo_.clear();
      indent_.resize(indent_.size() - 2);
      open("} else");
    }
    open(fmt::format("for (idx_t e = {}; e < (idx_t){}; e += {})", first, out.work, stride));
    unravel(l.idx, n.sizes, "e");
    memo_.clear();
    store(n.buffer, linear, value(l.value), l.value->dtype);
    close();
    if (plan) close();
  }

  void emit_rows(const CudaKernel& out) {
    if (split_) {
      open(fmt::format("for (idx_t g = blockIdx.x; g < (idx_t){}; g += gridDim.x)", out.work));
      line(fmt::format("const idx_t o = g / (idx_t){0}, part = g % (idx_t){0};", split_));
    } else {
      open(fmt::format("for (idx_t o = blockIdx.x; o < (idx_t){}; o += gridDim.x)", out.work));
    }
    unravel(k_.outer_vars, k_.outer, "o");
    registers_.clear();
    if (persistent_)
      for (const auto& [key, c] : persistent_->cache)
        line(c.per_slot ? fmt::format("{} {}[{}];", compute_ctype(c.dtype), c.array, persistent_->slots)
                        : fmt::format("{} {};", compute_ctype(c.dtype), c.array));
    if (persistent_ && prefetch_next_row.load()) prefetch_next_rows(out);
    for (size_t i = 0; i < k_.loops.size(); ++i) {
      const KernelLoop& l = k_.loops[i];
      loop_ = int(i);
      rename_ = row_renaming(row_of(l).first);
      element_vars_ = row_of(l).first;
      if (i > 0 && (!persistent_ || reads_earlier_writes_from_memory(i))) line("__syncthreads();");
      if (lg_.nodes[size_t(l.node)].kind == LoopNode::Kind::Reduction) emit_reduction(l);
      else emit_row_pointwise(l);
    }
    // The next outer point's loops may overwrite what this one's read (a shared row; with rows in memory, what
    // the last loop reads from other threads' elements). A persistent row's memory is the row's own.
    if (!persistent_ || !shared_locals_.empty()) line("__syncthreads();");
    close();
  }

  void emit_row_pointwise(const KernelLoop& l) {
    const LoopNode& n = lg_.nodes[size_t(l.node)];
    const size_t outer = k_.outer_vars.size();
    std::vector<Index> inner(l.idx.begin() + int64_t(outer), l.idx.end());
    Shape inner_sizes(n.sizes.begin() + int64_t(outer), n.sizes.end());
    open_row_loop("j", shape_numel(inner_sizes));
    unravel(inner, inner_sizes, "j");
    memo_.clear();
    store(n.buffer, ix_linear(l.idx, n.sizes), value(l.value), l.value->dtype);
    close_row_loop();
    memo_.clear();
  }

  struct ReduceCode {
    std::string acc_type, identity, combine;  // combine: an expression of a and b
  };
  ReduceCode reduce_code(ReduceOp op, DType dt) const {
    const bool fl = is_floating(dt);
    const std::string t = (fl && op == ReduceOp::Sum) ? "double" : compute_ctype(dt);
    const bool b = compute_dtype_of(dt) == DType::Bool;
    const DType cdt = compute_dtype_of(dt);
    auto extreme = [&](bool max_init) -> std::string {  // the identity of max (lowest) / min (highest)
      if (fl) return float_literal(max_init ? -INFINITY : INFINITY, cdt);
      if (b) return max_init ? "false" : "true";
      switch (cdt) {
        case DType::U8: return max_init ? "(unsigned char)0" : "(unsigned char)255";
        case DType::I8: return max_init ? "(signed char)-128" : "(signed char)127";
        case DType::I16: return max_init ? "(short)-32768" : "(short)32767";
        case DType::I32: return max_init ? "(int)(-2147483647 - 1)" : "(int)2147483647";
        default: return max_init ? int_literal(INT64_MIN) : int_literal(INT64_MAX);
      }
    };
    switch (op) {
      case ReduceOp::Sum:
        if (b) return {t, "false", "(a | b)"};
        return {t, fmt::format("({})0", t), fl ? "a + b" : fmt::format("({})kiln_wrap_add((i64)a, (i64)b)", t)};
      case ReduceOp::Prod:
        if (b) return {t, "true", "(a & b)"};
        return {t, fmt::format("({})1", t), fl ? "a * b" : fmt::format("({})kiln_wrap_mul((i64)a, (i64)b)", t)};
      case ReduceOp::Max:
        if (b) return {t, "false", "(a | b)"};
        return {t, extreme(true), fl ? "kiln_maximum(a, b)" : "(a < b ? b : a)"};
      case ReduceOp::Min:
        if (b) return {t, "true", "(a & b)"};
        return {t, extreme(false), fl ? "kiln_minimum(a, b)" : "(b < a ? b : a)"};
      case ReduceOp::Any: return {"bool", "false", "(a | b)"};
      case ReduceOp::All: return {"bool", "true", "(a & b)"};
      default: break;
    }
    internal_fail("cuda codegen: no combine for {}", reduce_op_name(op));
  }

  // Reduction loop `l` at the current outer point: a strided share per thread, then the block's reduction; the
  // result is finalised in every thread, stored by thread 0 and kept in a register for the later loops.
  void emit_reduction(const KernelLoop& l) {
    const LoopNode& n = lg_.nodes[size_t(l.node)];
    const DType dt = l.value->dtype;
    const bool arg = n.reduce == ReduceOp::ArgMax || n.reduce == ReduceOp::ArgMin;
    const std::string acc = fresh("acc"), best = fresh("arg");
    ReduceCode rc;
    if (arg) {
      rc.acc_type = compute_ctype(dt);
      line(fmt::format("{} {} = ({})0;", rc.acc_type, acc, rc.acc_type));
      line(fmt::format("i64 {} = -1;", best));
    } else {
      rc = reduce_code(n.reduce, dt);
      line(fmt::format("{} {} = {};", rc.acc_type, acc, rc.identity));
    }
    open_row_loop("r", shape_numel(n.rsizes));
    unravel(l.ridx, n.rsizes, "r");
    memo_.clear();
    const std::string v = value(l.value);
    if (arg) {
      const std::string at = fmt::format("(i64)({})", index(ix_linear(l.ridx, n.rsizes)));
      open(fmt::format("if (kiln_arg_better({}, {}, {}, {}, {}))", v, at, acc, best,
                       n.reduce == ReduceOp::ArgMax ? "true" : "false"));
      line(fmt::format("{} = {};", acc, v));
      line(fmt::format("{} = {};", best, at));
      close();
    } else {
      line(fmt::format("{{ const {0} a = {1}; const {0} b = ({0}){2}; {1} = {3}; }}", rc.acc_type, acc, v, rc.combine));
    }
    close_row_loop();
    memo_.clear();
    element_vars_.clear();  // the finalisation runs once, outside the element loop
    std::string result;
    DType result_dt = dt;
    if (arg) {
      result = fresh("red");
      line(fmt::format("const i64 {} = kiln_block_argreduce({}, {}, {});", result, acc, best,
                       n.reduce == ReduceOp::ArgMax ? "true" : "false"));
      result_dt = DType::I64;
    } else {
      result = fresh("red");
      line(fmt::format("const {0} {1} = kiln_block_reduce({2}, ({0}){3}, []({0} a, {0} b) {{ return ({0})({4}); }});",
                       rc.acc_type, result, acc, rc.identity, rc.combine));
      if (split_) result = combine_split_partials(rc, result);
      if (rc.acc_type == "double" && is_floating(dt)) result_dt = DType::F64;
    }
    if (n.finalize) {
      acc_ = result;
      SExpr f = n.finalize(s_load(kAccumulatorBuffer, ix_const(0), result_dt));
      result = value(f);
      result_dt = f->dtype;
      acc_.clear();
      memo_.clear();
    }
    const Index at = ix_linear(l.idx, n.sizes);
    const Buffer& buf = lg_.buffers[size_t(n.buffer)];
    open("if (threadIdx.x == 0)");
    store(n.buffer, at, result, result_dt);
    close();
    const std::string reg = fresh("reg");
    line(fmt::format("const {} {} = {};", compute_ctype(buf.dtype), reg,
                     from_storage(to_storage(cast(result, result_dt, buf.dtype), buf.dtype), buf.dtype)));
    registers_[n.buffer] = {at.str(), reg};
    if (split_) close();  // the last block's branch (combine_split_partials)
  }

  // A split reduction's block result `partial`: written to the workspace; the last block of the row to arrive (an
  // atomic count per row, reset by that block for the next launch) combines the row's partials in part order
  // (deterministic) and goes on, in a branch emit_reduction closes, to finalise and store; the others stop there.
  std::string combine_split_partials(const ReduceCode& rc, const std::string& partial) {
    const int64_t outer = std::max<int64_t>(1, shape_numel(k_.outer));
    const int64_t partials_bytes = (outer * split_ * 8 + 15) / 16 * 16;
    out_->workspace_bytes = partials_bytes + outer * 4;
    line(fmt::format("{0}* __restrict__ partials = reinterpret_cast<{0}*>(workspace);", rc.acc_type));
    line(fmt::format("unsigned* __restrict__ arrivals = reinterpret_cast<unsigned*>(workspace + {});", partials_bytes));
    open("if (threadIdx.x == 0)");
    line(fmt::format("partials[g] = {};", partial));
    line("__threadfence();");
    line(fmt::format("kiln_last_block = atomicAdd(&arrivals[o], 1u) == {}u;", split_ - 1));
    close();
    line("__syncthreads();");
    open("if (kiln_last_block)");
    line("__threadfence();");
    const std::string acc = fresh("acc"), result = fresh("red");
    line(fmt::format("{} {} = {};", rc.acc_type, acc, rc.identity));
    open(fmt::format("for (idx_t p = threadIdx.x; p < (idx_t){}; p += blockDim.x)", split_));
    line(fmt::format("{{ const {0} a = {1}; const {0} b = ((volatile {0}*)partials)[o * (idx_t){2} + p]; {1} = {3}; }}",
                     rc.acc_type, acc, split_, rc.combine));
    close();
    line(fmt::format("const {0} {1} = kiln_block_reduce({2}, ({0}){3}, []({0} a, {0} b) {{ return ({0})({4}); }});",
                     rc.acc_type, result, acc, rc.identity, rc.combine));
    line("if (threadIdx.x == 0) arrivals[o] = 0u;");
    return result;
  }
};

}  // namespace

void set_codegen_variant_for_benchmarks(const CodegenVariant& v) {
  persistent_slots = v.persistent_slots;
  prefetch_next_row = v.prefetch_next_row;
}

CudaKernel emit_kernel_cuda(const Kernel& k, const LoweredGraph& lg, const std::vector<int>& args,
                            const LaunchChoice& choice) {
  return Emitter(k, lg, args, choice).emit();
}

}  // namespace kiln::cuda
