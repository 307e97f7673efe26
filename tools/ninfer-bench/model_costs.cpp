#include "ninfer/checkpoint/expected_tensors.hpp"
#include "rooflines.hpp"

namespace ninfer::tools {

ModelCosts model_costs(const ModelConfig& cfg, const MemoryReport& mem, int64_t max_sequences, int64_t kv_pool_tokens,
                       double embedding_bytes) {
  ModelCosts c;
  const auto in_use = [&](MemoryUse u) { return static_cast<double>(mem.in_use[static_cast<size_t>(u)]); };
  // What is on the device is what a step can read: exact for any dtype and layout.
  c.weight_bytes_per_step = in_use(MemoryUse::Weights) - (cfg.tie_word_embeddings ? 0.0 : embedding_bytes);
  c.kv_bytes_per_token = in_use(MemoryUse::KvCache) / static_cast<double>(kv_pool_tokens);
  c.state_bytes_per_seq = 2.0 * in_use(MemoryUse::State) / static_cast<double>(max_sequences);
  for (const ExpectedTensor& e : expected_tensors(cfg)) {
    double n = 1;
    for (int64_t d : e.shape) n *= static_cast<double>(d);
    c.parameters += n;
    // The LM head runs for one row per prompt (LogitsFor::Last), the embedding is a gather.
    if (e.role == TensorRole::Linear && e.layer >= 0) c.flop_per_token += 2.0 * n;
  }
  return c;
}

double decode_roofline(const ModelCosts& c, const DeviceRates& r, int32_t batch, int64_t context) {
  const double bytes = c.weight_bytes_per_step +
                       batch * (static_cast<double>(context) * c.kv_bytes_per_token + c.state_bytes_per_seq);
  return r.bandwidth > 0 ? batch * r.bandwidth / bytes : 0;
}

double prefill_roofline(const ModelCosts& c, const DeviceRates& r) {
  return r.matmul > 0 && c.flop_per_token > 0 ? r.matmul / c.flop_per_token : 0;
}

} // namespace ninfer::tools
