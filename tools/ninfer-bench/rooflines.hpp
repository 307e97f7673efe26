// The two rooflines every ninfer-bench figure is a fraction of. Decode is memory-bound: a
// step reads the weights once plus each sequence's KV rows and recurrent state, so its floor is
// bytes / bandwidth. Prefill is compute-bound: 2 FLOP per matrix parameter per token over the
// matrix-product rate. Both rates are measured on the card at start, never taken from a sheet.
#pragma once

#include <cstdint>
#include <string>

#include "ninfer/checkpoint/model_config.hpp"
#include "ninfer/runtime/backend.hpp"

namespace ninfer::tools {

struct DeviceRates {
  double bandwidth = 0;  // bytes/s, a device-to-device copy counting bytes read and written
  double matmul = 0;     // FLOP/s of a large matrix product
  std::string bandwidth_how, matmul_how;
};

// CUDA devices: cudaMemcpy of 2 GiB device to device; cuBLAS bf16 GEMM 8192^3 (f32 accumulate).
// Host: memcpy of 256 MiB; the backend's own linear op (the CPU plugin's GEMM) at 512x2048x2048.
DeviceRates measure_device_rates(Backend& be);

struct ModelCosts {
  double weight_bytes_per_step = 0; // a decode step reads every weight except the embedding table (unless tied)
  double kv_bytes_per_token = 0;    // cached K and V of one position, all attention layers
  double state_bytes_per_seq = 0;   // GDN conv + recurrent state, read and written each step
  double flop_per_token = 0;        // 2 x the decoder layers' matrix parameters (prefill)
  double parameters = 0;            // every matrix and vector of the model
};

// From the model's shapes and what the backend allocated for it (weights, KV cache, state);
// `kv_pool_tokens`: the tokens the KV block pool holds (CausalLM::kv_blocks_total x
// kv_block_tokens).
ModelCosts model_costs(const ModelConfig& cfg, const MemoryReport& mem, int64_t max_sequences, int64_t kv_pool_tokens,
                       double embedding_bytes);

// Roofline tok/s of a decode step of `batch` sequences at depth `context`, and of prefill.
double decode_roofline(const ModelCosts& c, const DeviceRates& r, int32_t batch, int64_t context);
double prefill_roofline(const ModelCosts& c, const DeviceRates& r);

} // namespace ninfer::tools
