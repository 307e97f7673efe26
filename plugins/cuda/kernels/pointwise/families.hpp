// Registration functions of the pointwise ops, each in the file named after its op
// (pointwise/<op>.cu; head_norm_rope.cu also registers head_norm_rope_append, its form with the
// KV append); register_pointwise_ops (pointwise/pointwise.cu) calls them all.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cuda_plugin {

int32_t register_rms_norm(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_gated_rms_norm(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_l2_norm(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_silu_mul(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_sigmoid_gate(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_rope(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_head_norm_rope(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_embedding(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_kv_append(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_copy_rows(const ninfer_registrar* r, char* err, size_t err_len);

} // namespace ninfer::cuda_plugin
