// embedding on the host (contract: ninfer/abi/ops/embedding.h).
#include <cstring>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/embedding.h"
#include "common/numerics.hpp"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_embedding_args*>(args);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    const int32_t id = a.ids[t];
    // -1 is what argmax and sample pick from a row of NaN or +inf logits: a step fed the previous
    // step's pick on the backend meets it here before the host reads that pick.
    if (id == -1)
      return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                  "token %lld has id -1: the pick of a row whose logits held NaN or +inf (the model produced "
                  "invalid output; rerun with NINFER_SYNC_OPS=1 to find the op)",
                  static_cast<long long>(t));
    if (id < 0 || id >= a.vocab)
      return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "token %lld has id %d outside [0, %d)",
                  static_cast<long long>(t), id, a.vocab);
    float* out = a.out + t * a.out_row_stride;
    const int64_t row = static_cast<int64_t>(id) * a.dim;
    if (a.dtype == NINFER_DTYPE_F32) {
      std::memcpy(out, static_cast<const float*>(a.table) + row, sizeof(float) * a.dim);
    } else {
      for (int32_t i = 0; i < a.dim; ++i) out[i] = load_weight(a.table, row + i, a.dtype);
    }
  }
  return NINFER_OK;
}

} // namespace

int32_t register_embedding(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_EMBEDDING, "reference", kF32OrBf16, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
