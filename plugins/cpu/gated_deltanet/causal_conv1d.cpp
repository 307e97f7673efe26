// causal_conv1d on the host (contract: ninfer/abi/ops/causal_conv1d.h). Each channel of each
// sequence slides a window of `kernel` inputs (kept in a small stack buffer) over its tokens;
// sums in double.
#include <algorithm>

#include "common/cpu_ops.hpp"
#include "gated_deltanet/gated_deltanet_math.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/causal_conv1d.h"
#include "common/numerics.hpp"
#include "common/parallel.hpp"

namespace ninfer::cpu_plugin {
namespace {

constexpr int32_t kMaxKernel = 16;

// Writes token states when asked (NINFER_SHAPE_TOKEN_STATES): any shape.
int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] >= 1 && s->dims[1] <= kMaxKernel;
}

void channel(const ninfer_causal_conv1d_args& a, int32_t seq, int32_t c) {
  const int32_t K = a.kernel;
  const int32_t t0 = a.batch.seq_start[seq], t1 = a.batch.seq_start[seq + 1];
  float* state = a.state + (static_cast<int64_t>(a.batch.seq_slot[seq]) * a.channels + c) * (K - 1);
  const float* w = a.weight + static_cast<int64_t>(c) * K;
  float win[kMaxKernel]; // win[0..K-2] = previous inputs, oldest first; win[K-1] = current
  std::copy(state, state + K - 1, win);
  for (int32_t t = t0; t < t1; ++t) {
    win[K - 1] = a.x[t * a.x_token_stride + c];
    double s = 0;
    for (int32_t j = 0; j < K; ++j) s += static_cast<double>(w[j]) * win[j];
    a.out[t * a.out_token_stride + c] = static_cast<float>(silu(s));
    std::copy(win + 1, win + K, win);
    if (a.token_states) std::copy(win, win + K - 1, a.token_states + (t * a.channels + c) * (K - 1));
  }
  std::copy(win, win + K - 1, state);
}

int32_t launch(const void*, const void* args, const ninfer_launch*, void*, char* err, size_t err_len) {
  return causal_conv1d_call(*static_cast<const ninfer_causal_conv1d_args*>(args), err, err_len);
}

} // namespace

int32_t causal_conv1d_call(const ninfer_causal_conv1d_args& a, char* err, size_t err_len) {
  if (a.kernel < 1 || a.kernel > kMaxKernel)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "kernel %d outside [1, %d]", a.kernel, kMaxKernel);
  const int64_t work = static_cast<int64_t>(a.batch.num_seqs) * a.channels;
  parallel_for(work, 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      channel(a, static_cast<int32_t>(i / a.channels), static_cast<int32_t>(i % a.channels));
  });
  return NINFER_OK;
}

int32_t register_causal_conv1d(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_CAUSAL_CONV1D, "reference", kF32Only, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
