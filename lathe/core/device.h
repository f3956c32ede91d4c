// Where a tensor's data lives.
#pragma once

#include <ostream>

namespace lathe {

enum class DeviceKind : unsigned char { cpu, lazy };

class Device {
 public:
  constexpr Device() = default;
  constexpr explicit Device(DeviceKind k) : kind_(k) {}
  static constexpr Device cpu() { return Device(DeviceKind::cpu); }
  static constexpr Device lazy() { return Device(DeviceKind::lazy); }
  constexpr DeviceKind kind() const { return kind_; }
  constexpr bool is_cpu() const { return kind_ == DeviceKind::cpu; }
  friend constexpr bool operator==(Device a, Device b) { return a.kind_ == b.kind_; }
  friend std::ostream& operator<<(std::ostream& os, Device d) {
    return os << (d.kind_ == DeviceKind::cpu ? "cpu" : "lazy");
  }

 private:
  DeviceKind kind_ = DeviceKind::cpu;
};

}  // namespace lathe
