// Devices and storage. kiln runs on `cpu` now; the device field and the Storage interface are ready for
// `cuda` (a storage knows its device and how to free itself; kernels check the device of their operands).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace kiln {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string str() const { return type == DeviceType::CPU ? "cpu" : "cuda:" + std::to_string(index); }
};

// A flat, untyped allocation. Tensors are typed, strided windows onto a Storage; views share one.
class Storage {
 public:
  // Allocates `nbytes` on `device` (64-byte aligned on the CPU). Contents are uninitialised. Freed blocks of
  // 1 MB and more are cached (up to 1 GB) and reused for allocations of the same size.
  static std::shared_ptr<Storage> allocate(int64_t nbytes, Device device = {});
  // Wraps memory owned elsewhere; `deleter` runs when the last tensor using it goes away.
  Storage(void* data, int64_t nbytes, Device device, std::function<void(void*)> deleter)
      : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}
  ~Storage() { if (deleter_) deleter_(data_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  int64_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // Bumped by every in-place write; autograd checks it to refuse gradients computed from overwritten values.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }
  // Bytes currently allocated by all CPU storages, and the peak since the last reset (memory benchmarks).
  static int64_t live_bytes();
  static int64_t peak_bytes();
  static void reset_peak_bytes();

 private:
  void* data_;
  int64_t nbytes_;
  Device device_;
  std::function<void(void*)> deleter_;
  uint64_t version_ = 0;
};

}  // namespace kiln
