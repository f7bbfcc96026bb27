// Custom ops (see custom.h): the run-time rows, their registry, and the functions the table calls for them
// (one trampoline per function kind that finds the row's user functions and checks what they return).
#include "ops/custom.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <regex>
#include <shared_mutex>
#include <unordered_map>

namespace kiln {

namespace {

struct CustomRow {
  OpInfo info;
  CustomOpFunctions functions;
  std::string registered_at;  // "file:line"
};

constexpr size_t kMaxCustomOps = 4096;

// Rows are never freed or moved: OpInfo pointers (graphs, OpCalls) stay valid for the process. Lookups by id
// read one atomic slot; lookups by name take the reader lock.
struct Registry {
  std::array<std::atomic<const CustomRow*>, kMaxCustomOps> by_id{};
  std::shared_mutex mutex;
  std::unordered_map<std::string, std::unique_ptr<CustomRow>> by_name;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: ops may be called during static destruction
  return *r;
}

const CustomRow& row_of(const OpCall& call) {
  const CustomRow* row = registry().by_id[size_t(call.op->id) - size_t(kNumOps)].load();
  KILN_ASSERT(row, "custom op {} has no registered row", call.op->name);
  return *row;
}

std::string site_str(const CallSite& where) { return fmt::format("{}:{}", where.file_name(), where.line()); }

std::vector<TensorMeta> custom_infer(const OpCall& call) {
  const CustomRow& row = row_of(call);
  std::vector<TensorMeta> metas = row.functions.meta(call);
  const Schema& s = row.info.schema;
  KILN_CHECK(s.returns_list || metas.size() == size_t(s.num_returns),
             "custom op {} (registered at {}): its meta function returned {} metas but the schema returns {}",
             row.info.name, row.registered_at, metas.size(), s.num_returns);
  return metas;
}

std::vector<Tensor> custom_kernel(const OpCall& call) {
  const CustomRow& row = row_of(call);
  std::vector<Tensor> outs = row.functions.kernel(call);
  std::vector<TensorMeta> metas = custom_infer(call);
  KILN_CHECK(outs.size() == metas.size(),
             "custom op {} (registered at {}): its kernel returned {} tensors but its meta function {}", row.info.name,
             row.registered_at, outs.size(), metas.size());
  const std::vector<Tensor> inputs = call.flat_tensors();
  for (size_t i = 0; i < outs.size(); ++i) {
    KILN_CHECK(outs[i].defined() && !outs[i].is_meta(),
               "custom op {} (registered at {}): its kernel returned an undefined or meta tensor as output {}",
               row.info.name, row.registered_at, i);
    KILN_CHECK(outs[i].dtype() == metas[i].dtype && outs[i].sizes() == metas[i].sizes,
               "custom op {} (registered at {}): output {} of its kernel is {}{} but its meta function says {}{}; "
               "the two must agree (capture and the inductor plan with the meta function)",
               row.info.name, row.registered_at, i, dtype_name(outs[i].dtype()), shape_str(outs[i].sizes()),
               dtype_name(metas[i].dtype), shape_str(metas[i].sizes));
    for (const Tensor& in : inputs)
      KILN_CHECK(!in.defined() || in.is_meta() || in.storage() != outs[i].storage(),
                 "custom op {} (registered at {}): output {} of its kernel shares memory with an input; custom ops "
                 "return new tensors (return a clone)",
                 row.info.name, row.registered_at, i);
  }
  return outs;
}

std::vector<Tensor> custom_vjp(const VjpCall& v) {
  const CustomRow& row = row_of(v.call);
  std::vector<Tensor> grads = row.functions.vjp(v);
  KILN_CHECK(grads.size() == v.needs_grad.size(),
             "custom op {} (registered at {}): its VJP returned {} gradients but the op has {} tensor inputs",
             row.info.name, row.registered_at, grads.size(), v.needs_grad.size());
  return grads;
}

// What a custom schema must be beyond parsing: a namespaced name, tensors returned, nothing mutated.
void check_custom_schema(std::string_view text, const Schema& s, const std::string& at) {
  auto bad = [&](const std::string& what) { fail("kiln::register_op at {}: schema '{}': {}", at, text, what); };
  const size_t sep = s.name.find("::");
  if (sep == std::string::npos || sep == 0 || sep + 2 >= s.name.size())
    bad(fmt::format("the op name '{}' needs a namespace, as in 'mylib::{}' (built-in names have none, so a custom "
                    "op never shadows one)", s.name, s.name));
  for (const ArgSpec& a : s.args)
    if (a.mutated) bad(fmt::format("argument '{}' is mutated (Tensor(a!)): custom ops return new tensors", a.name));
  std::string returns(text.substr(text.rfind("->") + 2));
  std::erase(returns, ' ');
  static const std::regex tensors(R"(Tensor|Tensor\[\]|\(Tensor(,Tensor)*\))");
  if (!std::regex_match(returns, tensors))
    bad(fmt::format("it returns '{}': custom ops return Tensor, Tensor[] or (Tensor, ...)", returns));
}

}  // namespace

CustomOp register_op(std::string_view schema, CustomOpFunctions functions, CallSite where) {
  const std::string at = site_str(where);
  Schema s;
  try {
    s = parse_schema(schema);
  } catch (const Error& e) {
    fail("kiln::register_op at {}: {}", at, e.what());
  }
  check_custom_schema(schema, s, at);
  KILN_CHECK(functions.meta, "kiln::register_op at {}: op '{}' needs a meta function (.meta: its output metas, "
             "which capture and the inductor use to plan without running it)", at, s.name);
  KILN_CHECK(functions.kernel, "kiln::register_op at {}: op '{}' needs an eager kernel (.kernel)", at, s.name);
  all_ops();  // the built-in table exists before the first custom id is handed out
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  if (auto it = r.by_name.find(s.name); it != r.by_name.end())
    fail("kiln::register_op at {}: op '{}' is already registered (at {}); register each op once (keep the "
         "CustomOp that register_op returns)", at, s.name, it->second->registered_at);
  KILN_CHECK(r.by_name.size() < kMaxCustomOps, "kiln::register_op at {}: more than {} custom ops", at, kMaxCustomOps);
  auto row = std::make_unique<CustomRow>();
  row->registered_at = at;
  row->functions = std::move(functions);
  OpInfo& info = row->info;
  info.id = OpId(size_t(kNumOps) + r.by_name.size());
  info.schema = std::move(s);
  info.name = info.schema.name;  // views the row's own string, which never moves
  info.family = "custom";
  info.kind = OpKind::Extern;
  info.differentiable = true;  // without a VJP, a call that needs a gradient is an error, not a silent zero
  info.infer = custom_infer;
  info.kernel = custom_kernel;
  if (row->functions.vjp) info.vjp = custom_vjp;
  const CustomRow* stored = row.get();
  r.by_id[size_t(info.id) - size_t(kNumOps)].store(stored);
  r.by_name.emplace(info.schema.name, std::move(row));
  return CustomOp(stored->info);
}

const OpInfo* find_custom_op(std::string_view name) {
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  auto it = r.by_name.find(std::string(name));
  return it == r.by_name.end() ? nullptr : &it->second->info;
}

const OpInfo* find_custom_op(OpId id) {
  if (!is_custom_op(id) || size_t(id) - size_t(kNumOps) >= kMaxCustomOps) return nullptr;
  const CustomRow* row = registry().by_id[size_t(id) - size_t(kNumOps)].load();
  return row ? &row->info : nullptr;
}

std::vector<Tensor> CustomOp::call(std::vector<IValue> args, CallSite where) const {
  OpCall call = bind_args(*info_, std::move(args));
  call.where = where;
  return dispatch(call);
}

Tensor CustomOp::operator()(std::vector<IValue> args, CallSite where) const { return call(std::move(args), where).at(0); }

}  // namespace kiln
