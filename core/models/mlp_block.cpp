#include "mlp_block.hpp"

namespace ninfer::models {

MlpBlock::MlpBlock(WeightLoader& w, const std::string& p, int64_t intermediate)
    : intermediate_(intermediate),
      gate_up_(w.projection({p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}, p + "mlp gate|up")),
      down_(w.matrix(p + "mlp.down_proj.weight", p + "mlp.down_proj")) {}

// norm, gate|up and SwiGLU (one op in decode), then the down projection added to the residual.
void MlpBlock::forward(Backend& be, const Step& s, const Scratch& scratch, const ops::NormedInput& in,
                       ops::Rows resid) {
  ops::norm_linear(be, s.tokens, in, gate_up_, /*gated=*/true, scratch.inner, scratch.proj, /*keep_normed=*/false);
  ops::linear(be, s.tokens, scratch.inner, down_, resid, /*accumulate=*/true);
}

} // namespace ninfer::models
