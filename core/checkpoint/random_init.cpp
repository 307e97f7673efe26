// Seeded initialisation of random checkpoint tensors. Each tensor has its own stream
// (splitmix64 seeded from the seed and the tensor's name), so values do not depend on the
// order tensors are written in, and Box-Muller normals avoid std::normal_distribution,
// whose output differs between standard libraries.
#include <cmath>
#include <numbers>

#include "ninfer/checkpoint/random_checkpoint.hpp"
#include "ninfer/support/hash.hpp"

namespace ninfer {
namespace {

constexpr double kMatrixStd = 0.02; // transformers' initializer_range for Qwen models

constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull; // splitmix64's increment

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += kGamma);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace

TensorInit::TensorInit(const ExpectedTensor& e, uint64_t seed) : role_(e.role) {
  uint64_t mix = seed ^ (fnv1a64(e.name) * 0x9e3779b97f4a7c15ull);
  state_ = start_ = splitmix64(mix);
  if (role_ == TensorRole::Conv1dWeight) conv_bound_ = 1.0 / std::sqrt(static_cast<double>(e.shape.back()));
}

double TensorInit::uniform() {
  // 53 random bits, shifted off 0 so log() is finite.
  return (static_cast<double>(splitmix64(state_) >> 11) + 0.5) * 0x1.0p-53;
}

double TensorInit::normal() {
  if (have_spare_) {
    have_spare_ = false;
    return spare_;
  }
  const double r = std::sqrt(-2.0 * std::log(uniform()));
  const double t = 2.0 * std::numbers::pi * uniform();
  spare_ = r * std::sin(t);
  have_spare_ = true;
  return r * std::cos(t);
}

void TensorInit::next(float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    double v = 0;
    switch (role_) {
      case TensorRole::Embedding:
      case TensorRole::Linear: v = kMatrixStd * normal(); break;
      case TensorRole::RmsNormWeight: v = 1.0 + kMatrixStd * normal(); break;
      case TensorRole::RmsNormOffsetWeight: v = kMatrixStd * normal(); break;
      case TensorRole::Conv1dWeight: v = conv_bound_ * (2.0 * uniform() - 1.0); break;
      case TensorRole::ALog: v = std::log(1.0 + 15.0 * uniform()); break;
      case TensorRole::DtBias: {
        const double dt = std::exp(std::log(1e-3) + (std::log(1e-1) - std::log(1e-3)) * uniform());
        v = dt + std::log(-std::expm1(-dt)); // softplus(v) == dt
        break;
      }
    }
    out[i] = static_cast<float>(v);
  }
}

// splitmix64 is a counter (after k draws the state is start + k * gamma), so seeking is O(1).
// Roles drawn from normal() spend two uniforms per pair of elements (cos for the even one, the
// spare sin for the odd one); the others one uniform per element.
void TensorInit::seek(uint64_t index) {
  const bool normal_pairs = role_ == TensorRole::Embedding || role_ == TensorRole::Linear ||
                            role_ == TensorRole::RmsNormWeight || role_ == TensorRole::RmsNormOffsetWeight;
  have_spare_ = false;
  if (!normal_pairs) {
    state_ = start_ + index * kGamma;
    return;
  }
  state_ = start_ + (index & ~uint64_t{1}) * kGamma;
  if (index & 1) (void)normal(); // the pair's even element; its odd one is now the spare
}

std::vector<float> random_tensor_values(const ExpectedTensor& e, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : e.shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  TensorInit(e, seed).next(v.data(), v.size());
  return v;
}

} // namespace ninfer
