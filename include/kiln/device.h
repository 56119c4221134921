#pragma once
// Devices. The CPU backend is always present; CUDA devices exist only in builds with CUDA and on
// machines with a GPU. Using a device that is not available throws kiln::Error.
#include <cstdint>
#include <ostream>
#include <string>

namespace kiln {

struct Device {
  enum class Kind : uint8_t { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;

  static Device cpu() { return {Kind::cpu, 0}; }
  static Device cuda(int index = 0) { return {Kind::cuda, index}; }
  bool is_cpu() const { return kind == Kind::cpu; }
  bool is_cuda() const { return kind == Kind::cuda; }
  std::string str() const; // "cpu", "cuda:0"
  friend bool operator==(Device a, Device b) { return a.kind == b.kind && a.index == b.index; }
  friend bool operator!=(Device a, Device b) { return !(a == b); }
};

std::ostream& operator<<(std::ostream& os, Device d);

/// The device factories use when none is given. Initially from KILN_DEVICE (cpu|cuda), else
/// CUDA when available, else the CPU. KILN_DEVICE=cuda without a usable GPU throws.
Device default_device();
/// Throws kiln::Error if the device is not available.
void set_default_device(Device d);
/// Whether the device can be used in this process (the CPU always can).
bool is_available(Device d);

} // namespace kiln
