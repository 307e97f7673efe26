// The bytes of a safetensors file through the header parser the checkpoint loader uses on
// its memory maps. Every tensor it accepts must lie inside the input (AddressSanitizer checks
// the first and last byte of each). Only ninfer::Error may come out.
#include <cstdint>
#include <vector>

#include "fuzz_support.hpp"
#include "ninfer/support/error.hpp"
#include "safetensors_header.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ninfer;
  // A copy of exactly `size` bytes, so a read past the end is caught.
  const std::vector<unsigned char> bytes(data, data + size);
  try {
    const auto contents = checkpoint_detail::parse_safetensors(bytes.data(), bytes.size(), "fuzz.safetensors");
    unsigned sum = 0;
    for (const TensorView& t : contents.tensors) {
      if (t.bytes == 0) continue;
      const auto* p = static_cast<const unsigned char*>(t.data);
      sum += p[0] + p[t.bytes - 1];
      if (t.numel() < 0) std::abort();
    }
    (void)sum;
  } catch (const Error&) {
  } catch (const std::exception& e) {
    fuzz::unexpected("safetensors_header", e);
  }
  return 0;
}
