// Guards (see guards.h).
#include "capture/guards.h"

#include "core/options.h"
#include "core/seed.h"

namespace kiln::capture {

std::string tensor_mismatch(std::string_view what, std::string_view name, const TensorMeta& expected, const Tensor& t) {
  const std::string subject = name.empty() ? std::string(what) : fmt::format("{} '{}'", what, name);
  if (t.dtype() != expected.dtype)
    return fmt::format("{} dtype mismatch: expected {}, got {}", subject, dtype_name(expected.dtype),
                       dtype_name(t.dtype()));
  if (t.device() != expected.device)
    return fmt::format("{} device mismatch: expected {}, got {}", subject, expected.device.str(),
                       t.device().str());
  if (t.sizes().size() != expected.sizes.size())
    return fmt::format("{} rank mismatch: expected {} dims, got {}", subject, expected.sizes.size(),
                       t.sizes().size());
  for (size_t i = 0; i < expected.sizes.size(); ++i)
    if (t.sizes()[i] != expected.sizes[i])
      return fmt::format("{} size mismatch at index {}: expected {}, got {}", subject, i, expected.sizes[i],
                         t.sizes()[i]);
  for (size_t i = 0; i < expected.strides.size(); ++i)
    if (t.strides()[i] != expected.strides[i])
      return fmt::format("{} stride mismatch at index {}: expected {}, got {}", subject, i,
                         expected.strides[i], t.strides()[i]);
  return "";
}

namespace {
std::string option_value_text(const OptionSpec& spec) {
  switch (spec.type) {
    case OptType::Bool: return opt_bool(spec.id) ? "1" : "0";
    case OptType::Int:
    case OptType::Bytes:  // a seed may exceed int64_t: read by its own parser (core/seed.h)
      return spec.id == Opt::Seed ? std::to_string(opt_seed()) : std::to_string(opt_int(spec.id));
    case OptType::String:
    case OptType::Choice: return opt_string(spec.id);
    case OptType::List: return fmt::format("{}", fmt::join(opt_list(spec.id), ","));
  }
  return "";
}
}  // namespace

std::string compiled_code_options(const std::string& backend) {
  std::string out = "backend=" + backend;
  for (const OptionSpec& spec : option_table())
    if (spec.repro_settable()) out += fmt::format(" {}={}", spec.env, option_value_text(spec));
  return out;
}

GuardSet::GuardSet(GuardSet&& o) noexcept
    : tensors_(std::move(o.tensors_)), numbers_(std::move(o.numbers_)), lengths_(std::move(o.lengths_)),
      num_leaves_(o.num_leaves_), grad_mode_(o.grad_mode_), options_(std::move(o.options_)),
      options_checked_at_(o.options_checked_at_.load()) {}

GuardSet GuardSet::of_call(const Flat& args, const std::vector<std::string>& leaf_names,
                           const std::vector<std::string>& length_names, const std::string& backend) {
  GuardSet g;
  g.num_leaves_ = args.leaves.size();
  for (size_t i = 0; i < args.leaves.size(); ++i) {
    const Leaf& leaf = args.leaves[i];
    if (!leaf.is_tensor) {
      g.numbers_.push_back({int(i), leaf_names.at(i), leaf.number});
      continue;
    }
    int same_as = -1;
    for (const TensorGuard& earlier : g.tensors_)
      if (args.leaves[size_t(earlier.leaf)].tensor.same(leaf.tensor)) {
        same_as = earlier.leaf;
        break;
      }
    g.tensors_.push_back({int(i), leaf_names.at(i), leaf.tensor.meta(), leaf.tensor.requires_grad(), same_as});
  }
  for (size_t i = 0; i < args.lengths.size(); ++i) g.lengths_.push_back({length_names.at(i), args.lengths[i]});
  g.grad_mode_ = grad_mode_enabled();
  g.options_ = compiled_code_options(backend);
  g.options_checked_at_ = options_generation() + 1;
  return g;
}

// Whether the tensor arguments that were one object at trace time still are, and the others still are not
// (an in-place update through one would show through the other). Sorted by address: O(n log n).
bool GuardSet::check_aliasing(const Flat& args, std::string* why) const {
  if (tensors_.size() < 2) return true;
  thread_local std::vector<std::pair<const TensorImpl*, int>> by_impl;  // scratch, reused by every check
  thread_local std::vector<int> first_same;
  by_impl.clear();
  for (const TensorGuard& g : tensors_) by_impl.emplace_back(args.leaves[size_t(g.leaf)].tensor.impl(), g.leaf);
  std::sort(by_impl.begin(), by_impl.end());
  first_same.assign(num_leaves_, -1);
  for (size_t i = 1; i < by_impl.size(); ++i)
    if (by_impl[i].first == by_impl[i - 1].first)
      first_same[size_t(by_impl[i].second)] = first_same[size_t(by_impl[i - 1].second)] >= 0
                                                  ? first_same[size_t(by_impl[i - 1].second)]
                                                  : by_impl[i - 1].second;
  for (const TensorGuard& g : tensors_) {
    if (first_same[size_t(g.leaf)] == g.same_as) continue;
    if (why) {
      auto name_of = [&](int leaf) {
        for (const TensorGuard& t : tensors_)
          if (t.leaf == leaf) return t.name;
        return std::string("?");
      };
      *why = g.same_as >= 0 ? fmt::format("tensor '{}' aliasing mismatch: expected the same object as '{}', got "
                                          "another object", g.name, name_of(g.same_as))
                            : fmt::format("tensor '{}' aliasing mismatch: expected its own object, got the same "
                                          "object as '{}'", g.name, name_of(first_same[size_t(g.leaf)]));
    }
    return false;
  }
  return true;
}

bool GuardSet::check(const Flat& args, const std::string& backend, std::string* why) const {
  if (args.leaves.size() != num_leaves_ || args.lengths.size() != lengths_.size()) {
    for (size_t i = 0; i < lengths_.size() && i < args.lengths.size(); ++i)
      if (args.lengths[i] != lengths_[i].length) {
        if (why) *why = fmt::format("'{}' length mismatch: expected {}, got {}", lengths_[i].name, lengths_[i].length,
                                    args.lengths[i]);
        return false;
      }
    if (why) *why = fmt::format("argument structure mismatch: expected {} leaves, got {}", num_leaves_, args.leaves.size());
    return false;
  }
  for (size_t i = 0; i < lengths_.size(); ++i)
    if (args.lengths[i] != lengths_[i].length) {
      if (why) *why = fmt::format("'{}' length mismatch: expected {}, got {}", lengths_[i].name, lengths_[i].length,
                                  args.lengths[i]);
      return false;
    }
  for (const TensorGuard& g : tensors_) {
    const Tensor& t = args.leaves[size_t(g.leaf)].tensor;
    if (!t.defined()) {
      if (why) *why = fmt::format("tensor '{}' is undefined", g.name);
      return false;
    }
    if (t.dtype() != g.meta.dtype || t.sizes() != g.meta.sizes || t.strides() != g.meta.strides ||
        t.device() != g.meta.device) {
      if (why) *why = tensor_mismatch("tensor", g.name, g.meta, t);
      return false;
    }
    if (t.requires_grad() != g.requires_grad) {
      if (why) *why = fmt::format("tensor '{}' requires_grad mismatch: expected {}, got {}", g.name, g.requires_grad,
                                  t.requires_grad());
      return false;
    }
  }
  for (const NumberGuard& g : numbers_) {
    const Scalar& s = args.leaves[size_t(g.leaf)].number;
    if (!(s == g.value)) {
      if (why) *why = fmt::format("'{}' == {} failed: got {}", g.name, g.value.str(), s.str());
      return false;
    }
  }
  if (!check_aliasing(args, why)) return false;
  if (grad_mode_enabled() != grad_mode_) {
    if (why) *why = fmt::format("grad mode mismatch: expected {}, got {}", grad_mode_ ? "enabled" : "disabled",
                                grad_mode_ ? "disabled" : "enabled");
    return false;
  }
  uint64_t generation = options_generation() + 1;
  if (options_checked_at_.load(std::memory_order_relaxed) != generation) {
    std::string now = compiled_code_options(backend);
    if (now != options_) {
      if (why) *why = fmt::format("kiln options mismatch: expected '{}', got '{}'", options_, now);
      return false;
    }
    options_checked_at_.store(generation, std::memory_order_relaxed);
  }
  return true;
}

std::vector<std::string> GuardSet::describe() const {
  std::vector<std::string> out;
  for (const TensorGuard& g : tensors_)
    out.push_back(fmt::format("tensor '{}': {}{} strides {} {} requires_grad={}{}", g.name, dtype_name(g.meta.dtype),
                              shape_str(g.meta.sizes), shape_str(g.meta.strides), g.meta.device.str(),
                              g.requires_grad, g.same_as >= 0 ? " (the same object as an earlier argument)" : ""));
  for (const NumberGuard& g : numbers_) out.push_back(fmt::format("'{}' == {}", g.name, g.value.str()));
  for (const LengthGuard& g : lengths_) out.push_back(fmt::format("len('{}') == {}", g.name, g.length));
  out.push_back(fmt::format("grad mode {}", grad_mode_ ? "enabled" : "disabled"));
  out.push_back(fmt::format("kiln options: {}", options_));
  return out;
}

}  // namespace kiln::capture
