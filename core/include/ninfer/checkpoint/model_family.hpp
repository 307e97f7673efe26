// A model family as config.json and the checkpoint tools see it: the config.json forms it
// accepts, what it reads and writes beyond the keys every family shares, the layer kinds it may
// have, and its presets (published shapes, small random checkpoints).
//
// A family is one folder, core/models/<family>/, and one line in core/models/model_families.cpp,
// which registers its description here and its decoder builder with the models module. The
// registry lives here, below models, because Checkpoint::open reads config.json.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "ninfer/checkpoint/json_fields.hpp"
#include "ninfer/checkpoint/model_config.hpp"

namespace ninfer {

// One config.json form. model_type is the registry key; architecture is the architectures[0]
// transformers writes with it. A nested form keeps the text model under text_config (the
// multimodal checkpoints), whose model_type must then be text_model_type.
struct ConfigForm {
  std::string model_type;
  std::string architecture;
  std::string text_model_type; // empty for a flat form
  bool nested() const { return !text_model_type.empty(); }
};

// A config by name, for tools that build a model from a seed instead of a checkpoint.
struct ModelPreset {
  std::string name;
  std::string description;
  ModelConfig (*config)(); // random_weights set
};

struct ModelFamily {
  std::string name;                   // "Qwen3.5": messages, READMEs, bench reports
  std::vector<ConfigForm> forms;      // the first flat one is what config_json_text writes
  std::vector<LayerKind> layer_kinds; // what its layer_types may name
  double default_partial_rotary_factor = 1.0; // when config.json names none (as transformers)
  // layer_types when config.json has none.
  void (*default_layer_types)(const JsonFields& text, ModelConfig& cfg) = nullptr;
  // The family's own keys of the text config and what its models always have; runs after the
  // shared keys and layer_types are read.
  void (*read_config)(const JsonFields& text, ModelConfig& cfg) = nullptr;
  // Adds the family's own keys to a config.json being written (after layer_types).
  void (*write_config)(const ModelConfig& cfg, nlohmann::ordered_json& j) = nullptr;
  std::vector<ModelPreset> shape_presets;  // published model shapes (ninfer-bench, ninfer-tune)
  std::vector<ModelPreset> random_presets; // CPU-sized checkpoints (ninfer-make-checkpoint)

  const ConfigForm& flat_form() const;
};

// Adds a family. Only the registration list calls it; a model_type or preset name that is
// already taken, or a family without a flat form, layer kinds or default layer_types, throws
// ninfer::Error.
void register_model_family(const ModelFamily& family);

// Every registered family, in registration order.
const std::vector<const ModelFamily*>& model_families();

struct FamilyForm {
  const ModelFamily* family;
  const ConfigForm* form;
};
// The family and form of a config.json model_type. Throws ninfer::Error naming it and every
// registered form when no family has it.
FamilyForm model_family_for(std::string_view model_type);
// "qwen3 (Qwen3ForCausalLM), qwen3_5_text (Qwen3_5ForCausalLM), ...": every registered form.
std::string supported_model_types_text();

// The family cfg names; throws ninfer::Error for a config that names none.
const ModelFamily& family_of(const ModelConfig& cfg);

} // namespace ninfer
