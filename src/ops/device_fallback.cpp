// The host fallback for ops on device tensors (device_fallback.h).
#include "ops/device_fallback.h"
#include "eager/device_copy.h"

#include <map>
#include <mutex>
#include <set>

#include "core/device_hooks.h"
#include "core/log.h"

namespace kiln {

namespace {

bool goes_with_any_device(const Tensor& t) { return t.device().type == DeviceType::CPU && t.dim() == 0; }

template <class F>
void for_each_tensor(const OpCall& call, F f) {
  for (size_t i = 0; i < call.args.size(); ++i) {
    const IValue& v = call.args[i];
    if (v.is_tensor()) f(v.tensor());
    else if (v.is_tensor_list())
      for (const Tensor& t : v.tensor_list()) f(t);
  }
}

// Host copies of the device storages of one call, so tensors that share a storage share its copy.
class HostMirrors {
 public:
  explicit HostMirrors(Device device) : device_(device) {}

  Tensor mirror(const Tensor& t) {
    if (!t.defined() || t.device().type == DeviceType::CPU) return t;
    std::shared_ptr<Storage>& host = host_of_[t.storage().get()];
    if (!host) {
      host = Storage::allocate(t.storage()->nbytes());
      copy_bytes(host->data(), Device{}, t.storage()->data(), t.device(), t.storage()->nbytes());
      device_of_[host.get()] = t;
    }
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = host;
    impl->offset = t.offset();
    impl->sizes = t.sizes();
    impl->strides = t.strides();
    impl->dtype = t.dtype();
    impl->wrapped_number = t.is_wrapped_number();
    return Tensor(std::move(impl));
  }

  // A result of the host kernel as a device tensor: the input itself, a view of it, or a copy.
  Tensor on_device(const Tensor& r) const {
    if (!r.defined() || r.is_meta()) return r;
    auto it = device_of_.find(r.storage().get());
    if (it == device_of_.end()) return to_device(r, device_);
    const Tensor& input = it->second;
    if (r.dtype() != input.dtype()) return to_device(r, device_);  // a reinterpreting view: a copy (not aliased)
    if (r.offset() == input.offset() && r.sizes() == input.sizes() && r.strides() == input.strides() &&
        r.dtype() == input.dtype())
      return input;
    return make_view(input, r.sizes(), r.strides(), r.offset());
  }

  // Copies the host copy of `t`'s storage back to the device (an in-place op wrote it).
  void write_back(const Tensor& t) const {
    auto it = host_of_.find(t.storage().get());
    if (it != host_of_.end()) copy_bytes(t.storage()->data(), t.device(), it->second->data(), Device{}, t.storage()->nbytes());
  }

 private:
  Device device_;
  std::map<const Storage*, std::shared_ptr<Storage>> host_of_;
  std::map<const Storage*, Tensor> device_of_;  // host copy -> a device tensor over the original storage
};

void log_fallback_once(const OpInfo& op, Device device) {
  static std::mutex mutex;
  static std::set<std::string> logged;
  if (!log_enabled(LogChannel::Lowering)) return;
  std::lock_guard lock(mutex);
  if (logged.insert(std::string(op.name)).second)
    KILN_LOG(LogChannel::Lowering, "{} on {} runs on the host (its storages copied there and back): eager kernels "
             "are written for host memory", op.name, device.str());
}

}  // namespace

Device call_device(const OpCall& call) {
  Device device;
  const Tensor* first = nullptr;
  for_each_tensor(call, [&](const Tensor& t) {
    if (!t.defined() || goes_with_any_device(t)) return;
    if (!first) {
      first = &t;
      device = t.device();
      return;
    }
    KILN_CHECK(t.device() == device, "{}: expected all tensors on one device, but found {} on {} and {} on {}; "
               "move them with Tensor::to(device)", call.op->name, first->str(), device.str(), t.str(), t.device().str());
  });
  return device;
}

Device results_device(const OpCall& call) {
  Device device;
  for_each_tensor(call, [&](const Tensor& t) {
    if (t.defined() && device.type == DeviceType::CPU) device = t.device();
  });
  return device;
}

std::vector<Tensor> run_eager_kernel(const OpCall& call) {
  const OpInfo& op = *call.op;
  const Device device = call_device(call);
  if (device.type == DeviceType::CPU) return op.kernel(call);
  log_fallback_once(op, device);
  HostMirrors mirrors(device);
  OpCall host = call;
  for (IValue& v : host.args) {
    if (v.is_tensor()) v = IValue(mirrors.mirror(v.tensor()));
    else if (v.is_tensor_list())
      for (Tensor& t : v.tensor_list()) t = mirrors.mirror(t);
  }
  std::vector<Tensor> outs = op.kernel(host);
  if (op.is_inplace()) mirrors.write_back(call.tensor(0));
  for (Tensor& t : outs) t = mirrors.on_device(t);
  return outs;
}

}  // namespace kiln
