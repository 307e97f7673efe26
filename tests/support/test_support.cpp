#include "test_support.hpp"

#include "ninfer/support/paths.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace ninfer::test {
namespace {

// Compiled-in locations, overridable by the environment (e.g. to run a copied test binary).
std::filesystem::path env_or(const char* var, const char* built_in) {
  const char* v = std::getenv(var);
  return v && *v ? v : built_in;
}

} // namespace

std::filesystem::path fixtures_dir() { return env_or("NINFER_TEST_FIXTURES", NINFER_TEST_FIXTURES); }
std::filesystem::path source_dir() { return env_or("NINFER_SOURCE_DIR", NINFER_SOURCE_DIR); }
std::filesystem::path build_dir() { return env_or("NINFER_BUILD_DIR", NINFER_BUILD_DIR); }
std::filesystem::path plugin_dir() { return ninfer::default_plugin_dir(); }
std::filesystem::path data_dir() { return ninfer::data_dir(); }
std::string forced_test_plugin() {
  const char* v = std::getenv("NINFER_TEST_PLUGIN");
  return v ? v : "";
}

const PluginHost& build_plugins() {
  static PluginHost* host = [] {
    auto* h = new PluginHost();
    h->load_directory(plugin_dir());
    return h;
  }();
  return *host;
}

std::mt19937_64 fresh_rng(const char* what) {
  uint64_t seed;
  if (const char* s = std::getenv("NINFER_TEST_SEED"); s && *s)
    seed = std::strtoull(s, nullptr, 10);
  else
    seed = static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  std::cerr << "[seed] " << what << ": NINFER_TEST_SEED=" << seed << "\n";
  return std::mt19937_64(seed);
}

std::string Mismatch::describe() const {
  if (ok) return "all elements within tolerance";
  return fmt::format("{} element(s) out of tolerance; first at index {}: got {} want {}", count, index, got, want);
}

Mismatch compare(const std::vector<float>& got, const std::vector<double>& want, Tolerance tol) {
  Mismatch m;
  if (got.size() != want.size()) {
    m.ok = false;
    m.count = std::max(got.size(), want.size());
    return m;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const bool bad = !std::isfinite(g) || std::fabs(g - w) > tol.abs + tol.rel * std::fabs(w);
    if (bad) {
      if (m.ok) {
        m.index = i;
        m.got = g;
        m.want = w;
      }
      m.ok = false;
      ++m.count;
    }
  }
  return m;
}

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0; // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

} // namespace ninfer::test
