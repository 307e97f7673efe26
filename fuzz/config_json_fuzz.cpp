// A checkpoint's config.json through load_model_config (parse, limits, defaults, validation)
// and, when it is accepted, the tensor list a model of that shape expects. Only ninfer::Error
// may come out.
#include <cstdint>

#include "fuzz_support.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/model_config.hpp"
#include "ninfer/support/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ninfer;
  const std::filesystem::path& dir = fuzz::scratch_dir();
  fuzz::write_file(dir / "config.json", reinterpret_cast<const char*>(data), size);
  try {
    const ModelConfig c = load_model_config(dir);
    size_t n = 0;
    for (const ExpectedTensor& t : expected_tensors(c)) n += t.shape.size();
    (void)n;
  } catch (const Error&) {
  } catch (const std::exception& e) {
    fuzz::unexpected("config_json", e);
  }
  return 0;
}
