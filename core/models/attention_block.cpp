#include "attention_block.hpp"

#include <fmt/format.h>

#include "kv_block_pool.hpp"
#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/abi/plugin_abi.h"
#include "ninfer/support/error.hpp"
#include "step_parts.hpp"

namespace ninfer::models {

AttentionSpec attention_spec(const ModelConfig& cfg) {
  AttentionSpec a;
  a.heads = static_cast<int32_t>(cfg.num_attention_heads);
  a.kv_heads = static_cast<int32_t>(cfg.num_key_value_heads);
  a.head_dim = static_cast<int32_t>(cfg.head_dim);
  a.rotary_dim = static_cast<int32_t>(cfg.rotary_dim());
  a.rope_theta = cfg.rope_theta;
  a.eps = static_cast<float>(cfg.rms_norm_eps);
  a.output_gate = cfg.attn_output_gate;
  a.qk_norm = cfg.norm_weight_offset ? ops::NormScale::OnePlusW : ops::NormScale::W;
  return a;
}

AttentionBlock::AttentionBlock(WeightLoader& w, Backend& be, const std::string& p, const AttentionSpec& spec,
                               const StepLimits& limits)
    : spec_(spec),
      qkv_(w.projection({p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"},
                        p + "self_attn q|k|v")),
      o_(w.matrix(p + "self_attn.o_proj.weight", p + "self_attn.o_proj")),
      q_norm_(w.vector(p + "self_attn.q_norm.weight", p + "self_attn.q_norm")),
      k_norm_(w.vector(p + "self_attn.k_norm.weight", p + "self_attn.k_norm")) {
  if (!ninfer_kv_dtype_takes_head_dim(limits.kv_dtype, spec.head_dim))
    throw Error(fmt::format("{}: a {} KV cache cannot hold head_dim {} (int8: a multiple of 64; int4r: a power of "
                            "two, at least 64); use kv_dtype auto, float16, bfloat16 or fp8",
                            p, ninfer_dtype_name(limits.kv_dtype), spec.head_dim));
  if (!limits.kv_pool) throw Error("internal: an attention layer without a KV block pool");
  const KvBlockPool& pool = *limits.kv_pool;
  // [pool_blocks, block_tokens, kv_heads, head_dim] (kv_append.h): a block's rows are contiguous.
  const size_t block_rows = static_cast<size_t>(pool.block_tokens()) * spec.kv_heads;
  block_bytes_ = block_rows * kv_row_bytes(limits.kv_dtype, spec.head_dim);
  block_scale_bytes_ = block_rows * kv_row_scale_bytes(limits.kv_dtype, spec.head_dim);
  const size_t bytes = static_cast<size_t>(pool.total_blocks()) * block_bytes_;
  const size_t scale_bytes = static_cast<size_t>(pool.total_blocks()) * block_scale_bytes_;
  k_cache_ = be.allocate(bytes, MemoryUse::KvCache, p + "self_attn K cache");
  v_cache_ = be.allocate(bytes, MemoryUse::KvCache, p + "self_attn V cache");
  if (scale_bytes) {
    k_scale_ = be.allocate(scale_bytes, MemoryUse::KvCache, p + "self_attn K cache scales");
    v_scale_ = be.allocate(scale_bytes, MemoryUse::KvCache, p + "self_attn V cache scales");
  }
  // Rows a sequence has not written are never read, but zeroed memory keeps a fault (or a
  // benchmark's assumed context, CausalLM::assume_context) free of NaN garbage.
  for (DeviceBuffer* b : {&k_cache_, &v_cache_, &k_scale_, &v_scale_})
    if (b->bytes()) be.zero(*b, 0, b->bytes());
  cache_.k = k_cache_.data();
  cache_.v = v_cache_.data();
  cache_.kv_heads = spec.kv_heads;
  cache_.head_dim = spec.head_dim;
  cache_.dtype = limits.kv_dtype;
  cache_.k_scale = scale_bytes ? k_scale_.data() : nullptr;
  cache_.v_scale = scale_bytes ? v_scale_.data() : nullptr;
  pool.describe(cache_);
}

void AttentionBlock::copy_kv_block(Backend& be, int32_t from, int32_t to) {
  const auto at = [](int32_t block, size_t bytes) { return static_cast<size_t>(block) * bytes; };
  be.copy(k_cache_, at(to, block_bytes_), k_cache_, at(from, block_bytes_), block_bytes_);
  be.copy(v_cache_, at(to, block_bytes_), v_cache_, at(from, block_bytes_), block_bytes_);
  if (!block_scale_bytes_) return;
  be.copy(k_scale_, at(to, block_scale_bytes_), k_scale_, at(from, block_scale_bytes_), block_scale_bytes_);
  be.copy(v_scale_, at(to, block_scale_bytes_), v_scale_, at(from, block_scale_bytes_), block_scale_bytes_);
}

// K, V, then the scales of a compact format, in that order at `offset`.
void AttentionBlock::spill_kv_block(Backend& be, int32_t block, const HostBuffer& to, size_t offset) {
  const auto b = static_cast<size_t>(block);
  be.spill(to, offset, k_cache_, b * block_bytes_, block_bytes_);
  be.spill(to, offset + block_bytes_, v_cache_, b * block_bytes_, block_bytes_);
  if (!block_scale_bytes_) return;
  be.spill(to, offset + 2 * block_bytes_, k_scale_, b * block_scale_bytes_, block_scale_bytes_);
  be.spill(to, offset + 2 * block_bytes_ + block_scale_bytes_, v_scale_, b * block_scale_bytes_, block_scale_bytes_);
}

void AttentionBlock::unspill_kv_block(Backend& be, int32_t block, const HostBuffer& from, size_t offset) {
  const auto b = static_cast<size_t>(block);
  be.unspill(k_cache_, b * block_bytes_, from, offset, block_bytes_);
  be.unspill(v_cache_, b * block_bytes_, from, offset + block_bytes_, block_bytes_);
  if (!block_scale_bytes_) return;
  be.unspill(k_scale_, b * block_scale_bytes_, from, offset + 2 * block_bytes_, block_scale_bytes_);
  be.unspill(v_scale_, b * block_scale_bytes_, from, offset + 2 * block_bytes_ + block_scale_bytes_, block_scale_bytes_);
}

int64_t AttentionBlock::q_width() const {
  return int64_t{spec_.heads} * spec_.head_dim * (spec_.output_gate ? 2 : 1);
}

ScratchNeeds AttentionBlock::needs() const {
  return {q_width() + 2 * kv_width(), int64_t{spec_.heads} * spec_.head_dim, 0, 0};
}

void AttentionBlock::forward(Backend& be, const Step& s, const Scratch& scratch, const ops::NormedInput& in,
                             ops::Rows resid) {
  const int64_t T = s.tokens, hd = spec_.head_dim;
  // Projection row: [q_0 (gate_0) q_1 (gate_1) ... | k | v]; with the gate, head h's query is
  // at 2*h*hd and its gate right after it.
  const ops::Rows proj = scratch.proj;
  const int64_t q_head_stride = spec_.output_gate ? 2 * hd : hd;
  const ops::Rows q = proj, k = proj.at(q_width()), v = proj.at(q_width() + kv_width());
  ops::norm_linear(be, T, in, qkv_, /*gated=*/false, proj, {}, /*keep_normed=*/false);
  // A mixed step attends in two calls: its prompt chunk as a prefill, its one-token rows as a
  // decode step (the fused decode kernel, keys split over the device); step_parts.hpp.
  for (const StepPart& part : StepParts(s)) {
    const int64_t r = part.first;
    ops::head_norm_rope_append_attention(be, part.step, {q.from(r), q_head_stride, spec_.heads}, q_norm_,
                                         {k.from(r), hd, spec_.kv_heads}, k_norm_, v.from(r), cache_, spec_.qk_norm,
                                         spec_.eps, spec_.rotary_dim, spec_.rope_theta, scratch.inner.from(r));
  }
  if (spec_.output_gate)
    ops::sigmoid_gate(be, T, scratch.inner, proj.at(hd), q_head_stride, spec_.heads, spec_.head_dim);
  ops::linear(be, T, scratch.inner, o_, resid, /*accumulate=*/true);
}

} // namespace ninfer::models
