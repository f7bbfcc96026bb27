// Memory and copies of devices other than the CPU (docs/cuda.md, "Device tensors"). src/core knows no device API:
// a backend installs its DeviceHooks at static initialisation (src/backends/cuda/device_hooks.cpp), so src/core and
// src/eager never include a device API's headers, every program starts on machines without a driver, and a use
// of the device there says why it cannot. Storage::allocate (device.h) serves devices through these hooks.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/device.h"

namespace kiln {

// What a device provides: its memory and synchronous copies to and from it. Every method throws kiln::Error with
// the reason when the device cannot do it (no driver, no such device).
class DeviceHooks {
 public:
  virtual ~DeviceHooks() = default;
  // `nbytes` (> 0) of uninitialised memory on `device`, freed by free() with the same size.
  virtual void* allocate(int64_t nbytes, Device device) = 0;
  virtual void free(void* data, int64_t nbytes, Device device) = 0;
  // Copies `nbytes`: `to` and `from` say where `dst` and `src` live (at least one is a device of these hooks; the
  // other may be the CPU). Ordered after all earlier work on the device; returns when the bytes are in place.
  virtual void copy(void* dst, Device to, const void* src, Device from, int64_t nbytes) = 0;
  // What `device` is, for records of where something ran (repro files): "NVIDIA H200 (sm_90)", or "none (<why>)"
  // when the device cannot be used here. Never throws.
  virtual std::string describe(Device device) { return device.str(); }
};

// Installs `hooks` for every device of `type` (null removes them); returns the previous ones. Not for the CPU.
DeviceHooks* set_device_hooks(DeviceType type, DeviceHooks* hooks);
// The hooks of `type`; throws kiln::Error naming what is missing when none are installed in this program.
DeviceHooks& device_hooks(DeviceType type);
// Copies `nbytes` from `src` on `from` to `dst` on `to` (any pair of the CPU and devices with hooks).
void copy_bytes(void* dst, Device to, const void* src, Device from, int64_t nbytes);
// "cpu", "cuda" (cuda:0), "cuda:N"; nullopt for anything else.
std::optional<Device> parse_device(std::string_view text);

}  // namespace kiln
