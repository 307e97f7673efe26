// CUDA variants of: embedding, rms_norm, gated_rms_norm, l2_norm, silu_mul, sigmoid_gate, rope, kv_append. (Registration stub: the family's kernels land here.)
#include "../cuda_variant.hpp"

namespace ninfer::cuda_plugin {

int32_t register_pointwise_ops(const ninfer_registrar*, char*, size_t) { return NINFER_OK; }

} // namespace ninfer::cuda_plugin
