#include "ninfer/checkpoint/expected_tensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "ninfer/checkpoint/quantized_tensors.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {

const char* tensor_role_name(TensorRole r) {
  switch (r) {
    case TensorRole::Embedding: return "embedding";
    case TensorRole::Linear: return "linear";
    case TensorRole::RmsNormWeight: return "rmsnorm (w)";
    case TensorRole::RmsNormOffsetWeight: return "rmsnorm (1+w)";
    case TensorRole::Conv1dWeight: return "conv1d";
    case TensorRole::ALog: return "A_log";
    case TensorRole::DtBias: return "dt_bias";
  }
  return "?";
}

std::string layer_prefix(const ModelConfig& cfg, int64_t layer) {
  return fmt::format("{}layers.{}.", cfg.weight_prefix, layer);
}

namespace {

class Builder {
 public:
  explicit Builder(const ModelConfig& c) : c_(c) {
    norm_ = c.norm_weight_offset ? TensorRole::RmsNormOffsetWeight : TensorRole::RmsNormWeight;
  }

  std::vector<ExpectedTensor> build() {
    const int64_t H = c_.hidden_size, V = c_.vocab_size;
    add(c_.weight_prefix + "embed_tokens.weight", {V, H}, TensorRole::Embedding, "[vocab_size, hidden_size]");
    for (int64_t i = 0; i < c_.num_layers; ++i) layer(i);
    add(c_.weight_prefix + "norm.weight", {H}, norm_, "[hidden_size]");
    if (!c_.tie_word_embeddings)
      add("lm_head.weight", {V, H}, TensorRole::Linear, "[vocab_size, hidden_size] (tie_word_embeddings false)");
    return std::move(out_);
  }

  // The MTP head: its fc over [embedding | hidden], its two input norms, one full-attention
  // layer, its final norm.
  std::vector<ExpectedTensor> build_mtp() {
    const int64_t H = c_.hidden_size;
    add("mtp.fc.weight", {H, 2 * H}, TensorRole::Linear, "[hidden_size, 2*hidden_size] (mtp)");
    add("mtp.pre_fc_norm_embedding.weight", {H}, norm_, "[hidden_size] (mtp)");
    add("mtp.pre_fc_norm_hidden.weight", {H}, norm_, "[hidden_size] (mtp)");
    layer_of_kind("mtp.layers.0.", LayerKind::FullAttention, -1);
    add("mtp.norm.weight", {H}, norm_, "[hidden_size] (mtp)");
    return std::move(out_);
  }

 private:
  void add(std::string name, std::vector<int64_t> shape, TensorRole role, const std::string& how,
           int64_t layer = -1) {
    out_.push_back({std::move(name), std::move(shape), role, layer, how + " from config.json"});
  }

  void layer(int64_t i) { layer_of_kind(layer_prefix(c_, i), c_.layer_types[static_cast<size_t>(i)], i); }

  void layer_of_kind(const std::string& p, LayerKind kind, int64_t i) {
    const int64_t H = c_.hidden_size, I = c_.intermediate_size;
    add(p + "input_layernorm.weight", {H}, norm_, "[hidden_size]", i);
    if (kind == LayerKind::FullAttention) attention(p, i);
    else linear_attention(p, i);
    add(p + "post_attention_layernorm.weight", {H}, norm_, "[hidden_size]", i);
    add(p + "mlp.gate_proj.weight", {I, H}, TensorRole::Linear, "[intermediate_size, hidden_size]", i);
    add(p + "mlp.up_proj.weight", {I, H}, TensorRole::Linear, "[intermediate_size, hidden_size]", i);
    add(p + "mlp.down_proj.weight", {H, I}, TensorRole::Linear, "[hidden_size, intermediate_size]", i);
  }

  void attention(const std::string& p, int64_t i) {
    const int64_t H = c_.hidden_size, D = c_.head_dim;
    const int64_t Q = c_.num_attention_heads * D, KV = c_.num_key_value_heads * D;
    // With the output gate each head's query rows are followed by its gate rows.
    if (c_.attn_output_gate)
      add(p + "self_attn.q_proj.weight", {2 * Q, H}, TensorRole::Linear,
          "[num_attention_heads*head_dim*2, hidden_size] (query + output gate)", i);
    else
      add(p + "self_attn.q_proj.weight", {Q, H}, TensorRole::Linear, "[num_attention_heads*head_dim, hidden_size]",
          i);
    add(p + "self_attn.k_proj.weight", {KV, H}, TensorRole::Linear, "[num_key_value_heads*head_dim, hidden_size]", i);
    add(p + "self_attn.v_proj.weight", {KV, H}, TensorRole::Linear, "[num_key_value_heads*head_dim, hidden_size]", i);
    add(p + "self_attn.o_proj.weight", {H, Q}, TensorRole::Linear, "[hidden_size, num_attention_heads*head_dim]", i);
    add(p + "self_attn.q_norm.weight", {D}, norm_, "[head_dim]", i);
    add(p + "self_attn.k_norm.weight", {D}, norm_, "[head_dim]", i);
  }

  void linear_attention(const std::string& p, int64_t i) {
    const int64_t H = c_.hidden_size, C = c_.linear_conv_dim(), VD = c_.linear_value_dim();
    const int64_t NV = c_.linear_num_value_heads;
    const std::string la = p + "linear_attn.";
    const char* conv = "[2*linear_num_key_heads*linear_key_head_dim + linear_num_value_heads*linear_value_head_dim";
    add(la + "in_proj_qkv.weight", {C, H}, TensorRole::Linear, fmt::format("{}, hidden_size]", conv), i);
    add(la + "in_proj_z.weight", {VD, H}, TensorRole::Linear,
        "[linear_num_value_heads*linear_value_head_dim, hidden_size]", i);
    add(la + "in_proj_b.weight", {NV, H}, TensorRole::Linear, "[linear_num_value_heads, hidden_size]", i);
    add(la + "in_proj_a.weight", {NV, H}, TensorRole::Linear, "[linear_num_value_heads, hidden_size]", i);
    add(la + "conv1d.weight", {C, 1, c_.linear_conv_kernel_dim}, TensorRole::Conv1dWeight,
        fmt::format("{}, 1, linear_conv_kernel_dim]", conv), i);
    add(la + "dt_bias", {NV}, TensorRole::DtBias, "[linear_num_value_heads]", i);
    add(la + "A_log", {NV}, TensorRole::ALog, "[linear_num_value_heads]", i);
    // The gated norm is a plain (w) RMSNorm over each value head, in both conventions.
    add(la + "norm.weight", {c_.linear_value_head_dim}, TensorRole::RmsNormWeight, "[linear_value_head_dim]", i);
    add(la + "out_proj.weight", {H, VD}, TensorRole::Linear,
        "[hidden_size, linear_num_value_heads*linear_value_head_dim]", i);
  }

  const ModelConfig& c_;
  TensorRole norm_;
  std::vector<ExpectedTensor> out_;
};

} // namespace

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& cfg) { return Builder(cfg).build(); }

std::vector<ExpectedTensor> mtp_tensors(const ModelConfig& cfg) {
  if (cfg.mtp_num_hidden_layers < 1) return {};
  return Builder(cfg).build_mtp();
}

const TensorView& require(const Checkpoint& ck, const ExpectedTensor& e) {
  return ck.require(e.name, e.shape, e.origin);
}

namespace {

// Presence and shape of every tensor of `list`; one message for all problems (up to a dozen).
void require_list(const Checkpoint& ck, const std::vector<ExpectedTensor>& list, const std::string& what) {
  std::vector<std::string> problems;
  size_t count = 0;
  auto problem = [&](std::string text) {
    ++count;
    if (problems.size() < 12) problems.push_back(std::move(text));
  };
  for (const auto& e : list) {
    // A projection may be stored quantized: its packed tensors stand for it (and must hold a
    // matrix of the expected shape).
    if (e.role == TensorRole::Linear) {
      std::optional<QuantizedModule> q;
      try {
        q = find_quantized(ck, e.name);
      } catch (const Error& err) {
        problem(err.what());
        continue;
      }
      if (q) {
        if (std::vector<int64_t>{q->rows, q->cols} != e.shape)
          problem(fmt::format("{} ({}, {} bits) holds a {} matrix, expected {} = {}", q->module,
                              quant_method_name(q->method), q->scheme.bits,
                              shape_string({q->rows, q->cols}), shape_string(e.shape), e.origin));
        continue;
      }
    }
    if (!ck.has(e.name)) problem(fmt::format("missing {} {}", e.name, shape_string(e.shape)));
    else if (ck.tensor(e.name).shape != e.shape)
      problem(fmt::format("{} has shape {}, expected {} = {}", e.name, shape_string(ck.tensor(e.name).shape),
                          shape_string(e.shape), e.origin));
    else if (const DType d = ck.tensor(e.name).dtype; d != DType::F32 && d != DType::BF16 && d != DType::F16)
      // (FP8 and packed integer weights are quantized modules, taken above.)
      problem(fmt::format("{} has dtype {}; a plain weight is F32, BF16 or F16", e.name, dtype_name(d)));
  }
  if (count == 0) return;
  throw Error(fmt::format("checkpoint {} does not match its config.json{} ({} problem(s)):\n  {}{}", ck.dir().string(),
                          what, count, fmt::join(problems, "\n  "),
                          count > problems.size() ? fmt::format("\n  ... and {} more", count - problems.size())
                                                  : std::string()));
}

} // namespace

void require_all(const Checkpoint& ck) { require_list(ck, expected_tensors(ck.config()), ""); }

void require_mtp(const Checkpoint& ck) {
  const ModelConfig& cfg = ck.config();
  const std::string config = cfg.config_path.empty() ? std::string("config.json") : cfg.config_path.string();
  if (cfg.mtp_num_hidden_layers < 1)
    throw Error(fmt::format("{} has no multi-token-prediction head (mtp_num_hidden_layers is {}): speculative "
                            "decoding with MTP needs a checkpoint that ships one (Qwen3.5 and Qwen3.6 do); run "
                            "without --spec mtp",
                            config, cfg.mtp_num_hidden_layers));
  if (cfg.mtp_num_hidden_layers > 1)
    throw Error(fmt::format("{}: mtp_num_hidden_layers is {}; ninfer runs Qwen3.5's MTP head of one layer, which "
                            "every draft reuses",
                            config, cfg.mtp_num_hidden_layers));
  require_list(ck, mtp_tensors(cfg), " (its MTP head, mtp.*)");
}

std::vector<std::string> unrecognised_tensors(const Checkpoint& ck) {
  std::set<std::string> expected;
  for (const auto& e : expected_tensors(ck.config())) {
    expected.insert(e.name);
    if (e.role != TensorRole::Linear) continue;
    try {
      if (const auto q = find_quantized(ck, e.name)) expected.insert(q->tensors.begin(), q->tensors.end());
    } catch (const Error&) {
      // require_all reports it
    }
  }
  std::vector<std::string> out;
  for (const auto& n : ck.names())
    if (!expected.count(n) && !Checkpoint::is_auxiliary(n)) out.push_back(n);
  return out;
}

} // namespace ninfer
