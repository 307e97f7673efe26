// attention on the host (contract: ninfer/abi/ops/attention.h). One (token, head) row at a
// time with an online softmax in double: no score buffer, so no workspace, and the result
// does not depend on how rows are split across threads. The cache is float32, float16 or
// bfloat16 (E: common/numerics.hpp's KvF32 / KvF16 / KvBf16), whose elements widen exactly, or
// a compact format, whose rows are dequantized one at a time (common/kv_formats.hpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "common/kv_formats.hpp"
#include "common/numerics.hpp"
#include "ninfer/abi/ops/attention.h"
#include "common/parallel.hpp"

namespace ninfer::cpu_plugin {
namespace {

constexpr int32_t kMaxHeadDim = 512; // the accumulator lives on the stack

int32_t supports(const void*, const ninfer_shape* s) {
  const int64_t head_dim = s->dims[0], heads = s->dims[1], kv_heads = s->dims[2];
  return s->tokens > 0 && head_dim > 0 && head_dim <= kMaxHeadDim && kv_heads > 0 && heads % kv_heads == 0 &&
         ninfer_kv_dtype_takes_head_dim(s->dtype, head_dim);
}

// One (token, head) row's operands: its query, its slot's cache (the row of key j through the
// block table: key(j), value(j)), its position, and where its output goes.
template <class E>
struct Row {
  const float* q;
  const ninfer_kv_cache* c;
  const typename E::T *k0, *v0; // kv head g's elements in the pool's first row
  float* out;
  int32_t slot, pos, hd;

  Row(const ninfer_attention_args& a, int64_t t, int32_t h) {
    c = &a.cache;
    hd = c->head_dim;
    pos = a.batch.token_pos[t];
    slot = a.batch.seq_slot[a.batch.token_seq[t]];
    const int64_t g = h / (a.heads / c->kv_heads);
    q = a.q + t * a.q_token_stride + h * a.q_head_stride;
    k0 = static_cast<const typename E::T*>(c->k) + g * hd;
    v0 = static_cast<const typename E::T*>(c->v) + g * hd;
    out = a.out + t * a.out_token_stride + static_cast<int64_t>(h) * hd;
  }
  // The launch checked every row [0, pos] of the slot resolves (ninfer_kv_cache_row >= 0).
  const typename E::T* key(int32_t j) const { return k0 + ninfer_kv_cache_row(c, slot, j); }
  const typename E::T* value(int32_t j) const { return v0 + ninfer_kv_cache_row(c, slot, j); }
};

// Softmax-weighted sum of value rows in one pass over the keys, in double: the running maximum
// rescales what was accumulated when a larger score arrives.
struct OnlineSoftmax {
  int32_t hd;
  double acc[kMaxHeadDim];
  double m = -std::numeric_limits<double>::infinity(), sum = 0;
  explicit OnlineSoftmax(int32_t head_dim) : hd(head_dim) { std::fill(acc, acc + hd, 0.0); }
  // Adds value row v (element d: v(d)) with score s.
  template <class Value>
  void add(double s, const Value& v) {
    if (s > m) { // new maximum: rescale what was accumulated against the old one
      const double r = std::exp(m - s);
      sum *= r;
      for (int32_t d = 0; d < hd; ++d) acc[d] *= r;
      m = s;
    }
    const double w = std::exp(s - m);
    sum += w;
    for (int32_t d = 0; d < hd; ++d) acc[d] += w * v(d);
  }
  void write(float* out) const {
    for (int32_t d = 0; d < hd; ++d) out[d] = static_cast<float>(acc[d] / sum);
  }
};

template <class E>
void attend_row(const ninfer_attention_args& a, int64_t t, int32_t h) {
  const Row<E> r(a, t, h);
  const int32_t hd = r.hd, pos = r.pos;
  const float* q = r.q;
  OnlineSoftmax o(hd);
  for (int32_t j = 0; j <= pos; ++j) {
    const typename E::T *k = r.key(j), *v = r.value(j);
    double s = 0;
    for (int32_t d = 0; d < hd; ++d) s += static_cast<double>(q[d]) * E::load(k[d]);
    o.add(s * a.scale, [&](int32_t d) { return static_cast<double>(E::load(v[d])); });
  }
  o.write(r.out);
}

// A row over a compact cache: each key and value row dequantized to float32 (exact for KV_INT8
// and KV_INT4R, one rounding for KV_FP8: kv_append.h), then the same double arithmetic as
// attend_row. KV_INT4R keys stay rotated; the query is rotated instead, in double
// (dot(H q, k') = dot(q, H k') since H is symmetric).
void attend_row_compact(const ninfer_attention_args& a, int64_t t, int32_t h) {
  const auto& c = a.cache;
  const int32_t hd = c.head_dim, pos = a.batch.token_pos[t];
  const int32_t slot = a.batch.seq_slot[a.batch.token_seq[t]], g = h / (a.heads / c.kv_heads);
  const float* q = a.q + t * a.q_token_stride + h * a.q_head_stride;
  double qr[kMaxHeadDim];
  float kr[kMaxHeadDim], vr[kMaxHeadDim];
  for (int32_t d = 0; d < hd; ++d) qr[d] = q[d];
  if (c.dtype == NINFER_DTYPE_KV_INT4R) hadamard_rotate(qr, hd);
  OnlineSoftmax o(hd);
  for (int32_t j = 0; j <= pos; ++j) {
    const int64_t row = kv_row(c, slot, j, g);
    kv_dequantize_row(c.dtype, c.k, c.k_scale, row, hd, kr);
    kv_dequantize_row(c.dtype, c.v, c.v_scale, row, hd, vr);
    double s = 0;
    for (int32_t d = 0; d < hd; ++d) s += qr[d] * kr[d];
    o.add(s * a.scale, [&](int32_t d) { return static_cast<double>(vr[d]); });
  }
  o.write(a.out + t * a.out_token_stride + static_cast<int64_t>(h) * hd);
}

// `emulate_mma_f16`: the numerics of the CUDA tensor-core prefill `prefill_mma_f16_*` on the CPU,
// for tests that separate what a kernel gets wrong from what its 16-bit inputs cost. The same
// rounding points in the same order: q * (scale * log2 e) in float32, then q, K and V rounded
// to fp16; keys in tiles of kMmaKeyTile from key 0 with a running max per tile; each weight
// exp2(s - running max) rounded to fp16 before it scales its value row and joins the sum.
// Products and sums in double (the GPU's float32 accumulation differs only in order). With a
// float16 cache the rounding of K and V already happened in kv_append (rounding again is exact).
constexpr int32_t kMmaKeyTile = 32; // the key tile of plugins/cuda/kernels/attention/prefill_mma.cu

template <class E>
void attend_row_emulate_f16(const ninfer_attention_args& a, int64_t t, int32_t h) {
  const Row<E> r(a, t, h);
  const int32_t hd = r.hd, pos = r.pos;
  const float* q = r.q;

  const float qscale = a.scale * 1.4426950408889634f;
  float qr[kMaxHeadDim];
  for (int32_t d = 0; d < hd; ++d) qr[d] = round_to_f16(q[d] * qscale);
  double acc[kMaxHeadDim], s[kMmaKeyTile];
  std::fill(acc, acc + hd, 0.0);
  double m = -std::numeric_limits<double>::infinity(), sum = 0;
  for (int32_t key0 = 0; key0 <= pos; key0 += kMmaKeyTile) {
    const int32_t n = std::min(kMmaKeyTile, pos + 1 - key0);
    double mx = -std::numeric_limits<double>::infinity();
    for (int32_t j = 0; j < n; ++j) {
      const typename E::T* k = r.key(key0 + j);
      double dot = 0;
      for (int32_t d = 0; d < hd; ++d) dot += static_cast<double>(qr[d]) * round_to_f16(E::load(k[d]));
      s[j] = dot;
      mx = std::max(mx, dot);
    }
    const double m_new = std::max(m, mx), alpha = std::exp2(m - m_new); // 0 on the first tile
    sum *= alpha;
    for (int32_t d = 0; d < hd; ++d) acc[d] *= alpha;
    m = m_new;
    for (int32_t j = 0; j < n; ++j) {
      const double w = round_to_f16(static_cast<float>(std::exp2(s[j] - m)));
      const typename E::T* v = r.value(key0 + j);
      sum += w;
      for (int32_t d = 0; d < hd; ++d) acc[d] += w * round_to_f16(E::load(v[d]));
    }
  }
  for (int32_t d = 0; d < hd; ++d) r.out[d] = static_cast<float>(acc[d] / sum);
}

using RowFn = void (*)(const ninfer_attention_args&, int64_t, int32_t);

// The row functions of a variant, one per cache element type: Fn<KvF32>::run, ...
template <class E>
struct Reference {
  static constexpr bool kTakesCompact = true;
  static void run(const ninfer_attention_args& a, int64_t t, int32_t h) { attend_row<E>(a, t, h); }
};
template <class E>
struct EmulateMmaF16 {
  static constexpr bool kTakesCompact = false;
  static void run(const ninfer_attention_args& a, int64_t t, int32_t h) { attend_row_emulate_f16<E>(a, t, h); }
};

template <template <class> class Fn>
int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_attention_args*>(args);
  const auto& c = a.cache;
  if (c.head_dim > kMaxHeadDim || c.kv_heads <= 0 || a.heads % c.kv_heads)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "heads %d / kv_heads %d / head_dim %d not supported",
                a.heads, c.kv_heads, c.head_dim);
  const bool compact = Fn<KvF32>::kTakesCompact && ninfer_kv_dtype_is_compact(c.dtype);
  const RowFn row_fn = c.dtype == NINFER_DTYPE_F32    ? Fn<KvF32>::run
                       : c.dtype == NINFER_DTYPE_F16  ? Fn<KvF16>::run
                       : c.dtype == NINFER_DTYPE_BF16 ? Fn<KvBf16>::run
                       : compact                      ? attend_row_compact
                                                      : nullptr;
  if (!row_fn)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "cache dtype %s is not one this variant reads",
                ninfer_dtype_name(c.dtype));
  if (compact && (!ninfer_kv_dtype_takes_head_dim(c.dtype, c.head_dim) || !c.k_scale || !c.v_scale))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "a %s cache of head_dim %d with%s scales (kv_append.h)",
                ninfer_dtype_name(c.dtype), c.head_dim, c.k_scale && c.v_scale ? "" : "out");
  if (const char* why = ninfer_kv_cache_layout_error(&c)) return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "%s", why);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    const int32_t slot = a.batch.seq_slot[a.batch.token_seq[t]];
    const int32_t pos = a.batch.token_pos[t];
    if (slot < 0 || slot >= c.slots || pos < 0 || pos >= c.capacity)
      return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                  "token %lld: slot %d position %d outside the cache (%d slots x %d positions)",
                  static_cast<long long>(t), slot, pos, c.slots, c.capacity);
    for (int32_t p = 0; p <= pos; p += c.block_tokens) // every block the row reads names one of the pool
      if (ninfer_kv_cache_row(&c, slot, p) < 0)
        return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                    "token %lld: slot %d block %d names no block of the pool (%d blocks)", static_cast<long long>(t),
                    slot, p / c.block_tokens, c.pool_blocks);
  }
  const int64_t t0 = l->token_begin, rows = (l->token_end - t0) * a.heads;
  parallel_for(rows, 4, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) row_fn(a, t0 + r / a.heads, static_cast<int32_t>(r % a.heads));
  });
  return NINFER_OK;
}

} // namespace

int32_t attention_supports(const void*, const ninfer_shape* s) { return supports(nullptr, s); }
int32_t attention_launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  return launch<Reference>(nullptr, args, l, stream, err, err_len);
}

// `reference` first: the planner keeps the first of equally good variants, so the emulation
// runs only where a schedule table names it.
int32_t register_attention(const ninfer_registrar* r) {
  static const ninfer_variant reference =
      host_variant(NINFER_OP_ATTENTION, "reference", kKvCacheDtypesAll, supports, launch<Reference>);
  static const ninfer_variant emulate = host_variant(NINFER_OP_ATTENTION, "emulate_mma_f16", kKvCacheDtypes,
                                                     supports, launch<EmulateMmaF16>);
  if (int32_t rc = r->add_variant(r->ctx, &reference); rc != NINFER_OK) return rc;
  return r->add_variant(r->ctx, &emulate);
}

} // namespace ninfer::cpu_plugin
