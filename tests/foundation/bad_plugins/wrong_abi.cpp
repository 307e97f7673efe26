// A plugin built against a future ABI: the core must refuse it without reading further.
#include <cstdint>

namespace {
struct FutureDescriptor {
  uint32_t abi_version;
  uint32_t struct_size;
  const char* name;
};
const FutureDescriptor kFuture = {999u, sizeof(FutureDescriptor), "from-the-future"};
} // namespace

extern "C" __attribute__((visibility("default"))) const void* ninfer_plugin_entry(void) { return &kFuture; }
