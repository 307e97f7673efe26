// Registration of the CUDA variants of attention (contract: ninfer/abi/ops/attention.h): the
// float32 prefill (prefill.cu), the tensor-core prefill (prefill_mma.cu) and the split-KV
// decode (decode.cu), each named by form, split count and head-dim class.
//
// Every variant reads a float32, float16 or bfloat16 cache (its dtype_mask; the planning shape's
// dtype is the cache's): it has one kernel per cache dtype and launches the call's.
//
// Shape rules common to both (head-dim classes, which shapes the decode serves, workspace) are
// in attention/shapes.hpp; the device building blocks in attention/tile.cuh.
#include "../../cuda_variant.hpp"
#include "attention/host.hpp"

namespace ninfer::cuda_plugin {

int32_t register_attention(const ninfer_registrar* r, char* err, size_t err_len) {
  if (int32_t rc = attention::register_attention_prefill(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = attention::register_attention_prefill_mma(r, err, err_len); rc != NINFER_OK) return rc;
  return attention::register_attention_decode(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
