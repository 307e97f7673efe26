// Registration functions of the pointwise op families, each in its own kernels/<family>.cu;
// register_pointwise_ops (pointwise/pointwise.cu) calls them all.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cuda_plugin {

int32_t register_norms(const ninfer_registrar* r, char* err, size_t err_len);       // pointwise/norms.cu
int32_t register_elementwise(const ninfer_registrar* r, char* err, size_t err_len); // pointwise/elementwise.cu
int32_t register_rope(const ninfer_registrar* r, char* err, size_t err_len);        // pointwise/rope.cu
int32_t register_head_norm_rope(const ninfer_registrar* r, char* err, size_t err_len); // pointwise/head_norm_rope.cu
int32_t register_embedding(const ninfer_registrar* r, char* err, size_t err_len);   // pointwise/embedding.cu
int32_t register_kv_append(const ninfer_registrar* r, char* err, size_t err_len);   // pointwise/kv_append.cu

} // namespace ninfer::cuda_plugin
