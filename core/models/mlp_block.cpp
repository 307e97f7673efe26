#include "mlp_block.hpp"

namespace ninfer::models {

MlpBlock::MlpBlock(WeightLoader& w, const std::string& p, int64_t intermediate)
    : intermediate_(intermediate),
      gate_up_(w.matrix({p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}, p + "mlp gate|up")),
      down_(w.matrix({p + "mlp.down_proj.weight"}, p + "mlp.down_proj")) {}

void MlpBlock::forward(Backend& be, const Step& s, const Scratch& scratch, ops::Rows x, ops::Rows out) {
  ops::linear(be, s.tokens, x, gate_up_, scratch.proj);
  ops::silu_mul(be, s.tokens, scratch.proj, scratch.proj.at(intermediate_), static_cast<int32_t>(intermediate_),
                scratch.inner);
  ops::linear(be, s.tokens, scratch.inner, down_, out);
}

} // namespace ninfer::models
