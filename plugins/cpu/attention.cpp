// attention on the host (contract: ninfer/abi/ops/attention.h). One (token, head) row at a
// time with an online softmax in double: no score buffer, so no workspace, and the result
// does not depend on how rows are split across threads.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu_ops.hpp"
#include "host_variant.hpp"
#include "ninfer/abi/ops/attention.h"
#include "parallel.hpp"

namespace ninfer::cpu_plugin {
namespace {

constexpr int32_t kMaxHeadDim = 512; // the accumulator lives on the stack

int32_t supports(const ninfer_shape* s) {
  const int64_t head_dim = s->dims[0], heads = s->dims[1], kv_heads = s->dims[2];
  return s->tokens > 0 && head_dim > 0 && head_dim <= kMaxHeadDim && kv_heads > 0 && heads % kv_heads == 0;
}

void attend_row(const ninfer_attention_args& a, int64_t t, int32_t h) {
  const auto& c = a.cache;
  const int32_t hd = c.head_dim;
  const int32_t slot = a.batch.seq_slot[a.batch.token_seq[t]];
  const int32_t pos = a.batch.token_pos[t];
  const int32_t g = h / (a.heads / c.kv_heads);
  const float* q = a.q + t * a.q_token_stride + h * a.q_head_stride;
  const int64_t pos_stride = static_cast<int64_t>(c.kv_heads) * hd;
  const float* k = c.k + static_cast<int64_t>(slot) * c.capacity * pos_stride + static_cast<int64_t>(g) * hd;
  const float* v = c.v + static_cast<int64_t>(slot) * c.capacity * pos_stride + static_cast<int64_t>(g) * hd;

  double acc[kMaxHeadDim];
  std::fill(acc, acc + hd, 0.0);
  double m = -std::numeric_limits<double>::infinity(), sum = 0;
  for (int32_t j = 0; j <= pos; ++j, k += pos_stride, v += pos_stride) {
    double s = 0;
    for (int32_t d = 0; d < hd; ++d) s += static_cast<double>(q[d]) * k[d];
    s *= a.scale;
    if (s > m) { // new maximum: rescale what was accumulated against the old one
      const double r = std::exp(m - s);
      sum *= r;
      for (int32_t d = 0; d < hd; ++d) acc[d] *= r;
      m = s;
    }
    const double w = std::exp(s - m);
    sum += w;
    for (int32_t d = 0; d < hd; ++d) acc[d] += w * v[d];
  }
  float* out = a.out + t * a.out_token_stride + static_cast<int64_t>(h) * hd;
  for (int32_t d = 0; d < hd; ++d) out[d] = static_cast<float>(acc[d] / sum);
}

int32_t launch(const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_attention_args*>(args);
  const auto& c = a.cache;
  if (c.head_dim > kMaxHeadDim || c.kv_heads <= 0 || a.heads % c.kv_heads)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "heads %d / kv_heads %d / head_dim %d not supported",
                a.heads, c.kv_heads, c.head_dim);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    const int32_t slot = a.batch.seq_slot[a.batch.token_seq[t]];
    const int32_t pos = a.batch.token_pos[t];
    if (slot < 0 || slot >= c.slots || pos < 0 || pos >= c.capacity)
      return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                  "token %lld: slot %d position %d outside the cache (%d slots x %d positions)",
                  static_cast<long long>(t), slot, pos, c.slots, c.capacity);
  }
  const int64_t t0 = l->token_begin, rows = (l->token_end - t0) * a.heads;
  parallel_for(rows, 4, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) attend_row(a, t0 + r / a.heads, static_cast<int32_t>(r % a.heads));
  });
  return NINFER_OK;
}

} // namespace

int32_t register_attention(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_ATTENTION, "reference", kF32Only, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
