// The decoder builder of each registered model family (the registration list is
// model_families.cpp; the families' config side is ninfer/checkpoint/model_family.hpp).
#pragma once

#include "decoder.hpp"
#include "ninfer/checkpoint/model_family.hpp"

namespace ninfer::models {

using DecoderBuilder = DecoderParts (*)(WeightLoader& w, Backend& be, const ModelConfig& cfg,
                                        const StepLimits& limits);

// The builder registered with `family`; throws ninfer::Error for a family without one.
DecoderBuilder decoder_builder(const ModelFamily& family);

} // namespace ninfer::models
