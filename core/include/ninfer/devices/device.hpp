// Devices the process can run on: the host CPU, and CUDA devices found through the runtime.
// With no GPU or no driver, discovery returns no CUDA devices and a note saying why; nothing
// else changes and the CPU plugin serves.
#pragma once

#include <string>
#include <vector>

#include "ninfer/abi/device_info.h"

namespace ninfer {

struct Discovery {
  std::vector<ninfer_device_info> cuda;
  std::string note; // why no CUDA device was found ("no NVIDIA GPU found (...)"), empty otherwise
  int driver_version = 0;
  int runtime_version = 0;
};

Discovery discover_devices();
ninfer_device_info host_device();

// The tools' --device values: auto, cpu, cuda, cuda:N. Throws ninfer::Error for anything else.
struct DeviceSpec {
  enum class Kind { Auto, Cpu, Cuda } kind = Kind::Auto;
  int index = 0; // cuda:N
  std::string text; // as given, for messages
};
DeviceSpec parse_device_spec(const std::string& text);

// The devices a spec names, best first: auto lists every CUDA device, then the host. Throws
// ninfer::Error when a named CUDA device is not there: with no GPU, discovery's note and "use
// --device cpu".
std::vector<ninfer_device_info> devices_for(const DeviceSpec& spec, const Discovery& discovery);

// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)".
std::string summary(const ninfer_device_info& d);

} // namespace ninfer
