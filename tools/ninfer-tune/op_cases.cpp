#include "op_cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <utility>

#include "ninfer/abi/ops/fill_random.h"
#include "ninfer/abi/ops/gdn_gating.h"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/quantize/quant_grid.hpp"

namespace ninfer::tools {
namespace {

// Bytes per element; 1 for the quantized dtypes, whose buffers are counted in bytes
// (fill_random's code bytes).
size_t elem_size(int32_t dtype) {
  return ninfer_dtype_is_quantized(dtype) ? 1 : dtype == NINFER_DTYPE_BF16 ? 2 : 4;
}

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

// The weight matrix W [N, K] of a linear or norm_linear case in the call's w_dtype, once per
// weight copy on the tuned backend (copies_for) and copy 0 again on the CPU backend for the
// reference. Float weights are fill_random values. Quantized weights (quant_weight.h) are
// fill_random's uniform code bytes (two int4 codes a byte) with the model's layout
// (QuantLayout): scales in its scale dtype within 25% of the step that maps the float weights'
// range onto the codes (products of the float cases' size), zero points in [0, 2^bits) where
// the model has them, and a shuffled channel-to-group map where it has a g_idx. Every copy holds
// the same values.
class CaseWeights {
 public:
  CaseWeights(Backend& be, int64_t N, int64_t K, int32_t dtype, const std::optional<QuantLayout>& quant, int64_t l2,
              uint64_t seed, const char* what, int64_t code_layout)
      : be_(be), dtype_(dtype), quant_(quant), code_layout_(static_cast<int32_t>(code_layout)) {
    const bool int4 = dtype == NINFER_DTYPE_INT4;
    bytes_ = static_cast<size_t>(N * (int4 ? (K + 1) / 2 : K)) * elem_size(dtype); // quant_weight.h's row_bytes
    if (quant_) make_layout(N, K, seed);
    const int n = copies_for(static_cast<int64_t>(bytes_ + scales_.size()), l2);
    const int64_t count = static_cast<int64_t>(bytes_ / elem_size(dtype));
    for (int c = 0; c < n; ++c)
      copies_.push_back(with_layout(be, random_buffer(be, count, dtype, 0.0346f, 0.f, seed + 1, what)));
  }
  int copies() const { return static_cast<int>(copies_.size()); }
  const void* w(int copy) const { return copies_[static_cast<size_t>(copy)].w.data(); }
  const ninfer_quant_weight* wq(int copy) const { return quant_ ? &copies_[static_cast<size_t>(copy)].wq : nullptr; }
  // Copy 0 on the CPU backend (made at the first call): the weights and their wq.
  std::pair<const void*, const ninfer_quant_weight*> on_cpu(Backend& cpu) {
    if (!cpu_) cpu_ = std::make_unique<Copy>(with_layout(cpu, to_cpu(cpu, be_, copies_[0].w, bytes_, "w")));
    return {cpu_->w.data(), quant_ ? &cpu_->wq : nullptr};
  }

 private:
  struct Copy {
    DeviceBuffer w, scales, zeros, g_idx;
    ninfer_quant_weight wq{};
  };

  void make_layout(int64_t N, int64_t K, uint64_t seed) {
    const int64_t group = quant_->group_size, G = (K + group - 1) / group;
    std::mt19937_64 rng(seed + 2);
    // Half the codes' range around the zero point: 7.5 (int4), 127.5 (int8), just under 2 for
    // fill_random's finite e4m3 codes.
    const float half_range = dtype_ == NINFER_DTYPE_INT4 ? 7.5f : dtype_ == NINFER_DTYPE_INT8 ? 127.5f : 1.875f;
    std::uniform_real_distribution<float> scale(0.75f * 0.0346f / half_range, 1.25f * 0.0346f / half_range);
    const int32_t sd = quant_->scale_dtype;
    for (int64_t i = 0; i < N * G; ++i) {
      const float v = scale(rng);
      const uint16_t h = sd == NINFER_DTYPE_BF16 ? f32_to_bf16(v) : f32_to_f16(v);
      const auto* p = sd == NINFER_DTYPE_F32 ? reinterpret_cast<const char*>(&v) : reinterpret_cast<const char*>(&h);
      scales_.insert(scales_.end(), p, p + (sd == NINFER_DTYPE_F32 ? 4 : 2));
    }
    if (quant_->zeros) {
      std::uniform_int_distribution<int> zero(0, dtype_ == NINFER_DTYPE_INT4 ? 15 : 255);
      for (int64_t i = 0; i < N * G; ++i) zeros_.push_back(static_cast<char>(zero(rng)));
    }
    if (quant_->g_idx) {
      std::vector<int32_t> g(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) g[static_cast<size_t>(k)] = static_cast<int32_t>(k / group);
      std::shuffle(g.begin(), g.end(), rng);
      g_idx_.resize(g.size() * 4);
      std::memcpy(g_idx_.data(), g.data(), g_idx_.size());
    }
  }
  // The codes (or float weights) `w` on backend `b`, with the scales, zero points and g_idx
  // beside them.
  Copy with_layout(Backend& b, DeviceBuffer w) const {
    Copy c;
    c.w = std::move(w);
    if (!quant_) return c;
    c.scales = upload(b, scales_, "tune scales");
    if (!zeros_.empty()) c.zeros = upload(b, zeros_, "tune zero points");
    if (!g_idx_.empty()) c.g_idx = upload(b, g_idx_, "tune g_idx");
    // Random bytes are random codes in either layout: the model's (the planning shape's dims[3]).
    c.wq = {c.scales.data(), c.zeros.as<const uint8_t>(), c.g_idx.as<const int32_t>(), quant_->scale_dtype,
            static_cast<int32_t>(quant_->group_size), code_layout_};
    return c;
  }

  Backend& be_;
  int32_t dtype_;
  std::optional<QuantLayout> quant_;
  int32_t code_layout_; // NINFER_QUANT_LAYOUT_* of the codes (quant_weight.h)
  size_t bytes_ = 0;                   // of one copy of w (the codes, for quantized weights)
  std::vector<char> scales_, zeros_, g_idx_; // host bytes of the layout, empty for float weights
  std::vector<Copy> copies_;
  std::unique_ptr<Copy> cpu_;
};

class LinearCase final : public RowwiseCase {
 public:
  LinearCase(Backend& be, const ninfer_shape& s, const std::optional<QuantLayout>& quant, int64_t max_tokens, int64_t l2,
             uint64_t seed)
      : RowwiseCase(be, s.dims[0], s.dims[1], max_tokens, seed, "tune linear x/y"), group_(s.dims[2]),
        layout_(s.dims[3]), dtype_(s.dtype), w_(be, out_, in_, dtype_, quant, l2, seed, "tune linear w", s.dims[3]) {
    copies_ = w_.copies();
  }
  std::string op() const override { return NINFER_OP_LINEAR; }
  ninfer_shape shape(int64_t t) const override { return {t, {in_, out_, group_, layout_}, dtype_}; }
  const void* args(int64_t t, int copy) override {
    a_ = call(x_.as<float>(), w_.w(copy), w_.wq(copy), y_.as<float>(), t);
    return &a_;
  }

 private:
  ninfer_linear_args call(const float* x, const void* w, const ninfer_quant_weight* wq, float* y, int64_t t) const {
    return {x, in_, w, y, out_, t, static_cast<int32_t>(in_), static_cast<int32_t>(out_), dtype_, /*accumulate=*/0, wq};
  }
  void run_reference(Backend& cpu, const float* cx, float* cy, int64_t n) override {
    const auto [w, wq] = w_.on_cpu(cpu);
    const ninfer_linear_args a = call(cx, w, wq, cy, n);
    cpu.run(NINFER_OP_LINEAR, shape(n), &a);
  }

  int64_t group_;  // the planning shape's dims[2]: 0, or the group size of quantized weights
  int64_t layout_; // its dims[3]: the codes' layout (linear.h)
  int32_t dtype_;
  CaseWeights w_;
  ninfer_linear_args a_{};
};

// norm_linear (dims: in_features, out_features, gated): RMS norm of x by norm_w, then the
// product, then (gated) SwiGLU of the two halves, so y rows are out_features / 2 wide.
class NormLinearCase final : public RowwiseCase {
 public:
  NormLinearCase(Backend& be, const ninfer_shape& s, const std::optional<QuantLayout>& quant, int64_t max_tokens,
                 int64_t l2, uint64_t seed)
      : RowwiseCase(be, s.dims[0], s.dims[2] ? s.dims[1] / 2 : s.dims[1], max_tokens, seed, "tune norm_linear x/y"),
        N_(s.dims[1]), gated_(static_cast<int32_t>(s.dims[2])), layout_(s.dims[3]), dtype_(s.dtype),
        w_(be, N_, in_, dtype_, quant, l2, seed, "tune norm_linear w", s.dims[3]) {
    copies_ = w_.copies();
    norm_w_ = random_buffer(be, in_, NINFER_DTYPE_F32, 0.2f, 1.f, seed + 5, "tune norm_linear norm_w");
  }
  std::string op() const override { return NINFER_OP_NORM_LINEAR; }
  ninfer_shape shape(int64_t t) const override { return {t, {in_, N_, gated_, layout_}, dtype_}; }
  const void* args(int64_t t, int copy) override {
    a_ = call(x_.as<float>(), norm_w_.as<float>(), w_.w(copy), w_.wq(copy), y_.as<float>(), t);
    return &a_;
  }

 private:
  ninfer_norm_linear_args call(const float* x, const float* norm_w, const void* w, const ninfer_quant_weight* wq,
                               float* y, int64_t t) const {
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
    a.wq = wq;
    return a;
  }
  void run_reference(Backend& cpu, const float* cx, float* cy, int64_t n) override {
    const auto [w, wq] = w_.on_cpu(cpu);
    if (cnorm_.empty()) cnorm_ = to_cpu(cpu, be_, norm_w_, static_cast<size_t>(in_) * 4, "norm_w");
    const ninfer_norm_linear_args a = call(cx, cnorm_.as<float>(), w, wq, cy, n);
    cpu.reserve_workspace(NINFER_OP_NORM_LINEAR, shape(n)); // the reference's row scratch
    cpu.run(NINFER_OP_NORM_LINEAR, shape(n), &a);
  }

  int64_t N_; // out_features (y rows are half of it when gated)
  int32_t gated_;
  int64_t layout_; // the planning shape's dims[3]: the codes' layout (norm_linear.h)
  int32_t dtype_;
  CaseWeights w_;
  DeviceBuffer norm_w_;
  DeviceBuffer cnorm_; // the norm weights on the CPU backend
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

std::unique_ptr<OpCase> make_op_case(Backend& be, const ninfer_shape& shape, const std::optional<QuantLayout>& quant,
                                     const std::string& op, int64_t max_tokens, int64_t l2_bytes, uint64_t seed) {
  if (op == NINFER_OP_LINEAR) return std::make_unique<LinearCase>(be, shape, quant, max_tokens, l2_bytes, seed);
  if (op == NINFER_OP_NORM_LINEAR)
    return std::make_unique<NormLinearCase>(be, shape, quant, max_tokens, l2_bytes, seed);
  if (op == NINFER_OP_GDN_GATING) return std::make_unique<GdnGatingCase>(be, shape, max_tokens, l2_bytes, seed);
  return nullptr;
}

} // namespace ninfer::tools
