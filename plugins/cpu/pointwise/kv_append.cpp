// kv_append on the host (contract: ninfer/abi/ops/kv_append.h): float32 rows into a float32,
// float16 or bfloat16 cache, rounded to nearest even on the way in, or quantized into a compact
// format (common/kv_formats.hpp).
#include <cstring>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/kv_append.h"
#include "common/kv_formats.hpp"
#include "common/numerics.hpp"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0 && ninfer_kv_dtype_takes_head_dim(s->dtype, s->dims[0]);
}

template <class E>
void store_row(void* cache, int64_t at, const float* src, int64_t n) {
  auto* dst = static_cast<typename E::T*>(cache) + at;
  for (int64_t i = 0; i < n; ++i) dst[i] = E::store(src[i]);
}

// The head rows of token t: each kv head's k and v rows, as store_row or kv_quantize_row.
struct StoreElements {
  template <class E>
  static void token(const ninfer_kv_append_args& a, int64_t t, int64_t row0) {
    const auto& c = a.cache;
    const int64_t n = static_cast<int64_t>(c.kv_heads) * c.head_dim; // a position's heads are contiguous
    store_row<E>(c.k, row0 * c.head_dim, a.k + t * a.k_token_stride, n);
    store_row<E>(c.v, row0 * c.head_dim, a.v + t * a.v_token_stride, n);
  }
};

void quantize_token(const ninfer_kv_append_args& a, int64_t t, int64_t row0) {
  const auto& c = a.cache;
  for (int32_t h = 0; h < c.kv_heads; ++h) {
    kv_quantize_row(c.dtype, /*key=*/true, a.k + t * a.k_token_stride + int64_t{h} * c.head_dim, c.head_dim, c.k,
                    c.k_scale, row0 + h);
    kv_quantize_row(c.dtype, /*key=*/false, a.v + t * a.v_token_stride + int64_t{h} * c.head_dim, c.head_dim, c.v,
                    c.v_scale, row0 + h);
  }
}

template <class Token>
int32_t append(const ninfer_kv_append_args& a, const ninfer_launch* l, char* err, size_t err_len, Token token) {
  const auto& c = a.cache;
  if (const char* why = ninfer_kv_cache_layout_error(&c)) return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "%s", why);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    const int32_t slot = a.batch.seq_slot[a.batch.token_seq[t]];
    const int32_t pos = a.batch.token_pos[t];
    if (slot < 0 || slot >= c.slots || pos < 0 || pos >= c.capacity)
      return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                  "token %lld: slot %d position %d outside the cache (%d slots x %d positions)",
                  static_cast<long long>(t), slot, pos, c.slots, c.capacity);
    const int64_t row0 = kv_row(c, slot, pos, 0);
    if (row0 < 0)
      return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "token %lld: slot %d block %d names no block of the pool (%d blocks)",
                  static_cast<long long>(t), slot, pos / c.block_tokens, c.pool_blocks);
    token(a, t, row0);
  }
  return NINFER_OK;
}

} // namespace

int32_t kv_append_launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_kv_append_args*>(args);
  const auto& c = a.cache;
  switch (c.dtype) {
    case NINFER_DTYPE_F32: return append(a, l, err, err_len, StoreElements::token<KvF32>);
    case NINFER_DTYPE_F16: return append(a, l, err, err_len, StoreElements::token<KvF16>);
    case NINFER_DTYPE_BF16: return append(a, l, err, err_len, StoreElements::token<KvBf16>);
  }
  if (!ninfer_kv_dtype_is_compact(c.dtype))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "cache dtype %d is not a KV cache dtype", c.dtype);
  if (!ninfer_kv_dtype_takes_head_dim(c.dtype, c.head_dim) || c.head_dim > 512)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "a %s cache cannot have head_dim %d (kv_append.h)",
                ninfer_dtype_name(c.dtype), c.head_dim);
  if (!c.k_scale || !c.v_scale)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "a %s cache needs k_scale and v_scale",
                ninfer_dtype_name(c.dtype));
  return append(a, l, err, err_len, quantize_token);
}

int32_t register_kv_append(const ninfer_registrar* r) {
  static const ninfer_variant v =
      host_variant(NINFER_OP_KV_APPEND, "reference", kKvCacheDtypesAll, supports, kv_append_launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
