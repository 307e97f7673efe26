// CUDA variants of: attention. (Registration stub: the family's kernels land here.)
#include "../cuda_variant.hpp"

namespace ninfer::cuda_plugin {

int32_t register_attention(const ninfer_registrar*, char*, size_t) { return NINFER_OK; }

} // namespace ninfer::cuda_plugin
