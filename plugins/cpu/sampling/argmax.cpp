// argmax on the host (contract: ninfer/abi/ops/argmax.h); the log-sum-exp in double.
#include <cmath>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/argmax.h"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0; }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_argmax_args*>(args);
  for (int64_t r = l->token_begin; r < l->token_end; ++r) {
    const float* row = a.logits + r * a.row_stride;
    int32_t best = 0;
    bool nan = false;
    for (int32_t j = 0; j < a.vocab; ++j) {
      nan |= std::isnan(row[j]);
      if (row[j] > row[best]) best = j;
    }
    a.ids[r] = nan ? -1 : best;
    if (a.logprob) {
      double sum = 0;
      for (int32_t j = 0; j < a.vocab; ++j) sum += std::exp(double(row[j]) - row[best]);
      a.logprob[r] = nan ? NAN : static_cast<float>(-std::log(sum));
    }
  }
  return NINFER_OK;
}

} // namespace

int32_t register_argmax(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_ARGMAX, "reference", kF32Only, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
