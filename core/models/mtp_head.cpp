#include "mtp_head.hpp"

#include "attention_block.hpp"
#include "common_parts.hpp"

namespace ninfer::models {

namespace {
constexpr const char* kPrefix = "mtp.";
constexpr const char* kLayerPrefix = "mtp.layers.0.";
} // namespace

MtpHead::MtpHead(WeightLoader& w, Backend& be, const ModelConfig& cfg, const StepLimits& limits)
    : hidden_(cfg.hidden_size),
      scale_(cfg.norm_weight_offset ? ops::NormScale::OnePlusW : ops::NormScale::W),
      eps_(static_cast<float>(cfg.rms_norm_eps)),
      fc_(w.matrix(std::string(kPrefix) + "fc.weight", "mtp.fc")),
      norm_embedding_(w.vector(std::string(kPrefix) + "pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_embedding")),
      norm_hidden_(w.vector(std::string(kPrefix) + "pre_fc_norm_hidden.weight", "mtp.pre_fc_norm_hidden")),
      layer_(load_layer_frame(w, cfg, kLayerPrefix)) {
  layer_.mixer = std::make_unique<AttentionBlock>(w, be, kLayerPrefix, attention_spec(cfg), limits);
  final_norm_ = w.vector(std::string(kPrefix) + "norm.weight", "mtp.norm");
  const auto rows = static_cast<size_t>(std::max<int64_t>(1, limits.max_tokens));
  const size_t row = sizeof(float) * static_cast<size_t>(hidden_);
  cat_ = be.allocate(rows * 2 * row, MemoryUse::Activations, "mtp [embedding | hidden]");
  residual_ = be.allocate(rows * row, MemoryUse::Activations, "mtp residual stream");
  normed_ = be.allocate(rows * row, MemoryUse::Activations, "mtp normed hidden");
}

ScratchNeeds MtpHead::needs() const { return layer_.mixer->needs().max(layer_.mlp->needs()); }

void MtpHead::forward(Backend& be, const Step& s, const Matrix& embedding, ops::Rows hidden, const Scratch& scratch,
                      ops::Rows out) {
  const int64_t T = s.tokens, H = hidden_;
  const ops::Rows cat{cat_.as<float>(), 2 * H}, resid{residual_.as<float>(), H}, normed{normed_.as<float>(), H};
  // [rmsnorm_e(embed(tok)) | rmsnorm_h(h)]: the embedding half first, as mtp.fc was trained.
  ops::embedding(be, s, embedding, cat);
  ops::rms_norm(be, T, cat, nullptr, norm_embedding_, scale_, eps_, cat);
  ops::rms_norm(be, T, hidden, nullptr, norm_hidden_, scale_, eps_, cat.at(H));
  ops::linear(be, T, cat, fc_, resid);
  layer_.mixer->forward(be, s, scratch, {resid, &layer_.input_norm, scale_, eps_, normed}, resid);
  layer_.mlp->forward(be, s, scratch, {resid, &layer_.post_norm, scale_, eps_, normed}, resid);
  ops::rms_norm(be, T, resid, nullptr, final_norm_, scale_, eps_, out);
}

} // namespace ninfer::models
