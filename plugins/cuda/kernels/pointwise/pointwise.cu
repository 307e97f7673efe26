// CUDA variants of the pointwise ops: embedding, rms_norm, gated_rms_norm, l2_norm, silu_mul,
// sigmoid_gate, rope, head_norm_rope, head_norm_rope_append, kv_append, copy_rows, each in its own file
// (pointwise/families.hpp); this is the one registration entry the plugin calls.
#include <initializer_list>

#include "../../cuda_variant.hpp"
#include "pointwise/families.hpp"

namespace ninfer::cuda_plugin {

int32_t register_pointwise_ops(const ninfer_registrar* r, char* err, size_t err_len) {
  using Register = int32_t (*)(const ninfer_registrar*, char*, size_t);
  for (Register fn : {register_embedding, register_rms_norm, register_gated_rms_norm, register_l2_norm,
                      register_silu_mul, register_sigmoid_gate, register_rope, register_head_norm_rope,
                      register_kv_append, register_copy_rows})
    if (int32_t rc = fn(r, err, err_len); rc != NINFER_OK) return rc;
  return NINFER_OK;
}

} // namespace ninfer::cuda_plugin
