#include "op_cases.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "ninfer/abi/ops/fill_random.h"
#include "ninfer/abi/ops/gdn_gating.h"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"

namespace ninfer::tools {
namespace {

size_t elem_size(int32_t dtype) { return dtype == NINFER_DTYPE_BF16 ? 2 : 4; }

DeviceBuffer random_buffer(Backend& be, int64_t count, int32_t dtype, float scale, float offset, uint64_t seed,
                           const char* what) {
  DeviceBuffer b = be.allocate(static_cast<size_t>(count) * elem_size(dtype), MemoryUse::Workspace, what);
  ninfer_fill_random_args a{b.data(), count, seed, scale, offset, dtype};
  ninfer_shape s{};
  s.tokens = (count + NINFER_FILL_RANDOM_ROW - 1) / NINFER_FILL_RANDOM_ROW;
  s.dtype = dtype;
  be.run(NINFER_OP_FILL_RANDOM, s, &a);
  return b;
}

std::vector<char> download(Backend& be, const DeviceBuffer& b, size_t offset, size_t bytes) {
  std::vector<char> h(bytes);
  be.synchronize();
  be.download(b, offset, h.data(), bytes);
  return h;
}

DeviceBuffer upload(Backend& be, const std::vector<char>& h, const char* what) {
  DeviceBuffer b = be.allocate(h.size(), MemoryUse::Workspace, what);
  be.upload(b, 0, h.data(), h.size());
  return b;
}

// The first `bytes` of a buffer of the tuned backend, copied to the CPU reference backend.
DeviceBuffer to_cpu(Backend& cpu, Backend& be, const DeviceBuffer& b, size_t bytes, const char* what) {
  return upload(cpu, download(be, b, 0, bytes), what);
}

double rel_l2(const float* got, const float* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

std::vector<int64_t> check_rows(int64_t tokens) {
  std::vector<int64_t> r{0, tokens / 2, tokens - 1};
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

int copies_for(int64_t weight_bytes, int64_t l2_bytes) {
  return static_cast<int>(std::clamp<int64_t>((3 * l2_bytes + weight_bytes - 1) / std::max<int64_t>(weight_bytes, 1), 1, 32));
}

// An op whose output row t depends on input row t only (linear, norm_linear): x is [T, in]
// float32, y [T, out] float32. A variant is checked on rows {0, T/2, T-1} against the CPU
// reference run on just those rows, computed once per bucket: the inputs never change, and every
// variant timed at a bucket is checked against the same rows (the LM head's reference alone is
// seconds of CPU time per call).
class RowwiseCase : public OpCase {
 public:
  double error_vs_reference(Backend& cpu, int64_t t) final {
    const auto rows = check_rows(t);
    const std::vector<float>& want = reference(cpu, t, rows);
    double worst = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto got = download(be_, y_, static_cast<size_t>(rows[i] * out_) * 4, static_cast<size_t>(out_) * 4);
      worst = std::max(worst, rel_l2(reinterpret_cast<const float*>(got.data()), want.data() + i * out_, out_));
    }
    return worst;
  }

 protected:
  RowwiseCase(Backend& be, int64_t in, int64_t out, int64_t max_tokens, uint64_t seed, const char* what)
      : be_(be), in_(in), out_(out) {
    x_ = random_buffer(be, max_tokens * in_, NINFER_DTYPE_F32, 1.f, 0.f, seed, what);
    y_ = be.allocate(static_cast<size_t>(max_tokens * out_) * 4, MemoryUse::Workspace, what);
  }
  // Runs the op on the CPU backend for the n rows of cx into cy ([n, out]).
  virtual void run_reference(Backend& cpu, const float* cx, float* cy, int64_t n) = 0;

  Backend& be_;
  int64_t in_, out_;
  DeviceBuffer x_, y_;

 private:
  const std::vector<float>& reference(Backend& cpu, int64_t t, const std::vector<int64_t>& rows) {
    if (auto it = reference_.find(t); it != reference_.end()) return it->second;
    std::vector<char> x;
    for (int64_t r : rows) {
      const auto row = download(be_, x_, static_cast<size_t>(r * in_) * 4, static_cast<size_t>(in_) * 4);
      x.insert(x.end(), row.begin(), row.end());
    }
    const int64_t n = static_cast<int64_t>(rows.size());
    DeviceBuffer cx = upload(cpu, x, "x");
    DeviceBuffer cy = cpu.allocate(static_cast<size_t>(n * out_) * 4, MemoryUse::Workspace, "y");
    run_reference(cpu, cx.as<float>(), cy.as<float>(), n);
    cpu.synchronize();
    return reference_[t] = std::vector<float>(cy.as<float>(), cy.as<float>() + n * out_);
  }

  std::map<int64_t, std::vector<float>> reference_; // tokens -> the reference's check rows
};

class LinearCase final : public RowwiseCase {
 public:
  LinearCase(Backend& be, const ninfer_shape& s, int64_t max_tokens, int64_t l2, uint64_t seed)
      : RowwiseCase(be, s.dims[0], s.dims[1], max_tokens, seed, "tune linear x/y"), dtype_(s.dtype) {
    copies_ = copies_for(out_ * in_ * static_cast<int64_t>(elem_size(dtype_)), l2);
    for (int c = 0; c < copies_; ++c)
      w_.push_back(random_buffer(be, out_ * in_, dtype_, 0.0346f, 0.f, seed + 1, "tune linear w"));
  }
  std::string op() const override { return NINFER_OP_LINEAR; }
  ninfer_shape shape(int64_t t) const override { return {t, {in_, out_, 0, 0}, dtype_}; }
  const void* args(int64_t t, int copy) override {
    a_ = call(x_.as<float>(), w_[static_cast<size_t>(copy)].data(), y_.as<float>(), t);
    return &a_;
  }

 private:
  ninfer_linear_args call(const float* x, const void* w, float* y, int64_t t) const {
    return {x, in_, w, y, out_, t, static_cast<int32_t>(in_), static_cast<int32_t>(out_), dtype_, /*accumulate=*/0};
  }
  void run_reference(Backend& cpu, const float* cx, float* cy, int64_t n) override {
    if (cw_.empty()) cw_ = to_cpu(cpu, be_, w_[0], static_cast<size_t>(out_ * in_) * elem_size(dtype_), "w");
    const ninfer_linear_args a = call(cx, cw_.data(), cy, n);
    cpu.run(NINFER_OP_LINEAR, shape(n), &a);
  }

  int32_t dtype_;
  std::vector<DeviceBuffer> w_;
  DeviceBuffer cw_; // weight copy 0 on the CPU backend, made at the first check
  ninfer_linear_args a_{};
};

// norm_linear (dims: in_features, out_features, gated): RMS norm of x by norm_w, then the
// product, then (gated) SwiGLU of the two halves, so y rows are out_features / 2 wide.
class NormLinearCase final : public RowwiseCase {
 public:
  NormLinearCase(Backend& be, const ninfer_shape& s, int64_t max_tokens, int64_t l2, uint64_t seed)
      : RowwiseCase(be, s.dims[0], s.dims[2] ? s.dims[1] / 2 : s.dims[1], max_tokens, seed, "tune norm_linear x/y"),
        N_(s.dims[1]), gated_(static_cast<int32_t>(s.dims[2])), dtype_(s.dtype) {
    copies_ = copies_for(N_ * in_ * static_cast<int64_t>(elem_size(dtype_)), l2);
    norm_w_ = random_buffer(be, in_, NINFER_DTYPE_F32, 0.2f, 1.f, seed + 5, "tune norm_linear norm_w");
    for (int c = 0; c < copies_; ++c)
      w_.push_back(random_buffer(be, N_ * in_, dtype_, 0.0346f, 0.f, seed + 1, "tune norm_linear w"));
  }
  std::string op() const override { return NINFER_OP_NORM_LINEAR; }
  ninfer_shape shape(int64_t t) const override { return {t, {in_, N_, gated_, 0}, dtype_}; }
  const void* args(int64_t t, int copy) override {
    a_ = call(x_.as<float>(), norm_w_.as<float>(), w_[static_cast<size_t>(copy)].data(), y_.as<float>(), t);
    return &a_;
  }

 private:
  ninfer_norm_linear_args call(const float* x, const float* norm_w, const void* w, float* y, int64_t t) const {
    ninfer_norm_linear_args a{};
    a.x = x;
    a.x_row_stride = in_;
    a.norm_w = norm_w;
    a.eps = 1e-6f;
    a.w = w;
    a.w_dtype = dtype_;
    a.y = y;
    a.y_row_stride = out_;
    a.tokens = t;
    a.in_features = static_cast<int32_t>(in_);
    a.out_features = static_cast<int32_t>(N_);
    a.gated = gated_;
    return a;
  }
  void run_reference(Backend& cpu, const float* cx, float* cy, int64_t n) override {
    if (cw_.empty()) {
      cw_ = to_cpu(cpu, be_, w_[0], static_cast<size_t>(N_ * in_) * elem_size(dtype_), "w");
      cnorm_ = to_cpu(cpu, be_, norm_w_, static_cast<size_t>(in_) * 4, "norm_w");
    }
    const ninfer_norm_linear_args a = call(cx, cnorm_.as<float>(), cw_.data(), cy, n);
    cpu.reserve_workspace(NINFER_OP_NORM_LINEAR, shape(n)); // the reference's row scratch
    cpu.run(NINFER_OP_NORM_LINEAR, shape(n), &a);
  }

  int64_t N_; // out_features (y rows are half of it when gated)
  int32_t gated_, dtype_;
  DeviceBuffer norm_w_;
  std::vector<DeviceBuffer> w_;
  DeviceBuffer cw_, cnorm_; // weight copy 0 and the norm weights on the CPU backend
  ninfer_norm_linear_args a_{};
};

class GdnGatingCase final : public OpCase {
 public:
  GdnGatingCase(Backend& be, const ninfer_shape& s, int64_t max_tokens, int64_t l2, uint64_t seed)
      : be_(be), H_(s.dims[0]), heads_(s.dims[1]), dtype_(s.dtype) {
    copies_ = copies_for(2 * heads_ * H_ * static_cast<int64_t>(elem_size(dtype_)), l2);
    x_ = random_buffer(be, max_tokens * H_, dtype_, 1.f, 0.f, seed, "tune gating x");
    for (int c = 0; c < copies_; ++c) {
      wa_.push_back(random_buffer(be, heads_ * H_, dtype_, 0.0346f, 0.f, seed + 1, "tune gating w_a"));
      wb_.push_back(random_buffer(be, heads_ * H_, dtype_, 0.0346f, 0.f, seed + 2, "tune gating w_b"));
    }
    a_log_ = random_buffer(be, heads_, NINFER_DTYPE_F32, 1.f, 1.f, seed + 3, "tune gating a_log");
    dt_bias_ = random_buffer(be, heads_, NINFER_DTYPE_F32, 1.f, -2.f, seed + 4, "tune gating dt_bias");
    g_ = be.allocate(static_cast<size_t>(max_tokens * heads_) * 4, MemoryUse::Workspace, "tune gating g");
    beta_ = be.allocate(static_cast<size_t>(max_tokens * heads_) * 4, MemoryUse::Workspace, "tune gating beta");
  }
  std::string op() const override { return NINFER_OP_GDN_GATING; }
  ninfer_shape shape(int64_t t) const override { return {t, {H_, heads_, 0, 0}, dtype_}; }
  const void* args(int64_t t, int copy) override {
    a_ = {x_.data(), H_, wa_[static_cast<size_t>(copy)].data(), wb_[static_cast<size_t>(copy)].data(),
          a_log_.as<float>(), dt_bias_.as<float>(), g_.as<float>(), beta_.as<float>(), t,
          static_cast<int32_t>(H_), static_cast<int32_t>(heads_), dtype_};
    return &a_;
  }
  double error_vs_reference(Backend& cpu, int64_t t) override {
    // The whole call on the CPU (gating is small: T x hidden x 2 heads' worth).
    const size_t e = elem_size(dtype_);
    DeviceBuffer cx = to_cpu(cpu, be_, x_, static_cast<size_t>(t * H_) * e, "x");
    DeviceBuffer ca = to_cpu(cpu, be_, wa_[0], static_cast<size_t>(heads_ * H_) * e, "w_a");
    DeviceBuffer cb = to_cpu(cpu, be_, wb_[0], static_cast<size_t>(heads_ * H_) * e, "w_b");
    DeviceBuffer cl = to_cpu(cpu, be_, a_log_, static_cast<size_t>(heads_) * 4, "a_log");
    DeviceBuffer cd = to_cpu(cpu, be_, dt_bias_, static_cast<size_t>(heads_) * 4, "dt_bias");
    DeviceBuffer cg = cpu.allocate(static_cast<size_t>(t * heads_) * 4, MemoryUse::Workspace, "g");
    DeviceBuffer cbeta = cpu.allocate(static_cast<size_t>(t * heads_) * 4, MemoryUse::Workspace, "beta");
    const ninfer_gdn_gating_args a{cx.data(), H_, ca.data(), cb.data(), cl.as<float>(), cd.as<float>(),
                                   cg.as<float>(), cbeta.as<float>(), t, static_cast<int32_t>(H_),
                                   static_cast<int32_t>(heads_), dtype_};
    cpu.run(NINFER_OP_GDN_GATING, shape(t), &a);
    const auto g = download(be_, g_, 0, static_cast<size_t>(t * heads_) * 4);
    const auto b = download(be_, beta_, 0, static_cast<size_t>(t * heads_) * 4);
    return std::max(rel_l2(reinterpret_cast<const float*>(g.data()), cg.as<float>(), t * heads_),
                    rel_l2(reinterpret_cast<const float*>(b.data()), cbeta.as<float>(), t * heads_));
  }

 private:
  Backend& be_;
  int64_t H_, heads_;
  int32_t dtype_;
  DeviceBuffer x_, a_log_, dt_bias_, g_, beta_;
  std::vector<DeviceBuffer> wa_, wb_;
  ninfer_gdn_gating_args a_{};
};

} // namespace

std::unique_ptr<OpCase> make_op_case(Backend& be, const ninfer_shape& shape, const std::string& op,
                                     int64_t max_tokens, int64_t l2_bytes, uint64_t seed) {
  if (op == NINFER_OP_LINEAR) return std::make_unique<LinearCase>(be, shape, max_tokens, l2_bytes, seed);
  if (op == NINFER_OP_NORM_LINEAR) return std::make_unique<NormLinearCase>(be, shape, max_tokens, l2_bytes, seed);
  if (op == NINFER_OP_GDN_GATING) return std::make_unique<GdnGatingCase>(be, shape, max_tokens, l2_bytes, seed);
  return nullptr;
}

} // namespace ninfer::tools
