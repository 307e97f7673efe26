// The model families ninfer runs. A family is a folder (core/models/<family>/: its config.json
// forms, own keys, presets and decoder) and one line below.
#include "model_families.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "ninfer/support/error.hpp"
#include "qwen3/family.hpp"
#include "qwen3_5/family.hpp"

namespace ninfer::models {
namespace {

std::vector<std::pair<const ModelFamily*, DecoderBuilder>>& builders() {
  static std::vector<std::pair<const ModelFamily*, DecoderBuilder>> b;
  return b;
}

// Registers the family's config side with the checkpoint module (which reads config.json and
// sits below models, so it cannot name the families itself) and its decoder here. Runs while
// ninfer_core's static objects are constructed, before anything can read a config.
struct Registration {
  Registration(const ModelFamily& family, DecoderBuilder build) {
    register_model_family(family);
    builders().emplace_back(&family, build);
  }
};

const Registration kFamilies[] = {
    {qwen3::family(), qwen3::build_decoder},
    {qwen3_5::family(), qwen3_5::build_decoder},
};

} // namespace

DecoderBuilder decoder_builder(const ModelFamily& family) {
  for (const auto& [f, build] : builders())
    if (f == &family) return build;
  throw Error(fmt::format("model family {} has no decoder registered", family.name));
}

} // namespace ninfer::models
