// Shared test helpers: where fixtures and plugins are, fresh random inputs, named tolerances,
// and the comparison every numeric test uses (NaN never passes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace ninfer {
class PluginHost;
}

namespace ninfer::test {

// The build's plugins, loaded once per test process.
const PluginHost& build_plugins();

std::filesystem::path fixtures_dir(); // tests/fixtures ($NINFER_TEST_FIXTURES overrides)
std::filesystem::path source_dir();   // the repository ($NINFER_SOURCE_DIR overrides)
std::filesystem::path build_dir();    // the build tree ($NINFER_BUILD_DIR overrides)
std::filesystem::path plugin_dir();   // ninfer::default_plugin_dir(): the build's plugins
std::filesystem::path data_dir();     // ninfer::data_dir(): the build's share/ninfer
// $NINFER_TEST_PLUGIN: the plugin the GPU tests force (e.g. cuda-generic), empty for the
// best-scoring one. Lets the same GPU test binaries check another plugin on the same card.
std::string forced_test_plugin();

// A generator seeded from the clock (printed, so a failure can be replayed by setting
// NINFER_TEST_SEED): every run draws fresh inputs.
std::mt19937_64 fresh_rng(const char* what);

// Named tolerance presets (see docs/validation.md).
struct Tolerance {
  const char* name;
  double abs;
  double rel;
};
inline constexpr Tolerance kFloat32Exact{"float32-accumulate", 1e-5, 1e-4};
inline constexpr Tolerance kBf16Inputs{"bf16-inputs-f32-accumulate", 1e-3, 1e-2};

struct Mismatch {
  bool ok = true;
  size_t index = 0;
  double got = 0, want = 0;
  size_t count = 0;
  std::string describe() const;
};

// Every element must satisfy |got - want| <= abs + rel*|want|; NaN or Inf in `got` fails.
Mismatch compare(const std::vector<float>& got, const std::vector<double>& want, Tolerance tol);

// float <-> bfloat16 (round to nearest even), for building bf16 inputs on the host.
uint16_t to_bf16(float f);
float from_bf16(uint16_t b);

} // namespace ninfer::test
