// ModelConfig -> config.json in the flat Hugging Face form transformers writes for the
// config's family (its flat form, plus the family's own keys), so the folder also loads in
// transformers.
#include <nlohmann/json.hpp>

#include "ninfer/checkpoint/model_family.hpp"
#include "ninfer/checkpoint/random_checkpoint.hpp"

namespace ninfer {

std::string config_json_text(const ModelConfig& c, DType dtype) {
  const ModelFamily& family = family_of(c);
  const ConfigForm& form = family.flat_form();
  nlohmann::ordered_json j;
  j["architectures"] = {c.architecture.empty() ? form.architecture : c.architecture};
  j["model_type"] = form.model_type;
  j["dtype"] = dtype == DType::BF16 ? "bfloat16" : dtype == DType::F16 ? "float16" : "float32";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  nlohmann::ordered_json rope;
  rope["rope_type"] = "default";
  rope["rope_theta"] = c.rope_theta;
  j["rope_parameters"] = rope;
  std::vector<std::string> types;
  for (LayerKind k : c.layer_types) types.emplace_back(layer_kind_name(k));
  j["layer_types"] = types;
  if (c.mtp_num_hidden_layers > 0) j["mtp_num_hidden_layers"] = c.mtp_num_hidden_layers;
  if (family.write_config) family.write_config(c, j);
  j["bos_token_id"] = c.bos_token_id ? nlohmann::ordered_json(*c.bos_token_id) : nlohmann::ordered_json();
  j["eos_token_id"] = c.eos_token_ids.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(c.eos_token_ids.front());
  j["pad_token_id"] = c.pad_token_id ? nlohmann::ordered_json(*c.pad_token_id) : nlohmann::ordered_json();
  j["use_cache"] = true;
  if (c.random_weights) j["ninfer_random_weights"] = true;
  return j.dump(2) + "\n";
}

} // namespace ninfer
