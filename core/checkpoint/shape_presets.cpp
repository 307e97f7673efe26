// Shape presets: the published shapes every registered model family lists, then the random
// checkpoint presets; the weights are never needed, only the sizes.
#include "ninfer/checkpoint/shape_presets.hpp"

#include <fmt/format.h>

#include "ninfer/checkpoint/model_family.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {

ModelConfig shape_preset_base(const ModelFamily& family, int64_t vocab) {
  ModelConfig c;
  c.family = &family;
  c.model_type = family.flat_form().model_type;
  c.architecture = family.flat_form().architecture;
  c.weight_prefix = "model.";
  c.vocab_size = vocab;
  c.rms_norm_eps = 1e-6;
  c.bos_token_id = 151643;
  c.eos_token_ids = {151645, 151643};
  c.random_weights = true;
  c.dtype = "bfloat16";
  return c;
}

const std::vector<RandomPreset>& shape_presets() {
  static const std::vector<RandomPreset> presets = [] {
    std::vector<RandomPreset> p;
    for (const ModelFamily* f : model_families())
      for (const auto& s : f->shape_presets) p.push_back({s.name, s.description});
    for (const auto& r : random_checkpoint_presets()) p.push_back(r);
    return p;
  }();
  return presets;
}

ModelConfig shape_preset_config(const std::string& name) {
  for (const ModelFamily* f : model_families())
    for (const auto& s : f->shape_presets)
      if (s.name == name) return s.config();
  for (const auto& r : random_checkpoint_presets())
    if (r.name == name) return random_checkpoint_config(name);
  std::string names;
  for (const auto& p : shape_presets()) names += (names.empty() ? "" : ", ") + p.name;
  throw Error(fmt::format("unknown shape preset '{}'; presets: {}", name, names));
}

} // namespace ninfer
