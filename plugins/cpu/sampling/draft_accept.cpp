// draft_accept on the host (contract: ninfer/abi/ops/draft_accept.h): per sequence, the longest
// prefix of its drafts that the model's own greedy picks repeat.
#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/draft_accept.h"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] >= 1; }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_draft_accept_args*>(args);
  const int64_t D = int64_t{a.drafts} + 1;
  for (int64_t i = l->token_begin; i < l->token_end; ++i) {
    const int32_t* proposed = a.ids + i * D + 1;
    const int32_t* target = a.picks + i * D;
    int32_t n = 0;
    while (n < a.drafts && target[n] >= 0 && proposed[n] == target[n]) ++n;
    a.accepted[i] = n;
    if (a.keep_row) a.keep_row[i] = static_cast<int32_t>(i * D + n);
  }
  return NINFER_OK;
}

} // namespace

int32_t register_draft_accept(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_DRAFT_ACCEPT, "reference", kF32Only, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
