#pragma once
// Where a tensor's storage lives. Device::cuda(i) is always a valid value; a
// build without CUDA raises "built without CUDA" when memory is asked of it.

#include <cstdint>
#include <string>

namespace reprise {

enum class DeviceKind : uint8_t { cpu, cuda };

class Device {
 public:
  constexpr Device() = default;
  static constexpr Device cpu() { return Device(DeviceKind::cpu, 0); }
  static constexpr Device cuda(int index = 0) { return Device(DeviceKind::cuda, index); }

  constexpr DeviceKind kind() const { return kind_; }
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return kind_ == DeviceKind::cpu; }
  constexpr bool is_cuda() const { return kind_ == DeviceKind::cuda; }

  friend constexpr bool operator==(Device, Device) = default;

 private:
  constexpr Device(DeviceKind kind, int index) : kind_(kind), index_(index) {}
  DeviceKind kind_ = DeviceKind::cpu;
  int index_ = 0;
};

std::string to_string(Device d);  // "cpu", "cuda:0"

// "cpu", "cuda" (cuda:0) or "cuda:N"; anything else raises an Error naming
// `what` (a flag or a variable) and the accepted forms. Whether the device
// exists is checked when memory is first asked of it.
Device parse_device(const std::string& text, const std::string& what);

// True when this build carries the CUDA backend.
bool built_with_cuda();

}  // namespace reprise
