// config.json -> ModelConfig: the keys every family shares, then the family's own (its hooks in
// core/models/<family>/). Defaults follow transformers' config classes, so a config that omits
// a key means what it means to transformers (docs/checkpoints.md).
#include "ninfer/checkpoint/model_config.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "ninfer/checkpoint/json_fields.hpp"
#include "ninfer/checkpoint/model_family.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {

const char* layer_kind_name(LayerKind k) {
  return k == LayerKind::FullAttention ? "full_attention" : "linear_attention";
}

int64_t ModelConfig::num_layers_of(LayerKind k) const {
  return std::count(layer_types.begin(), layer_types.end(), k);
}

namespace {

constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxDimension = int64_t{1} << 20;

// Where each part of the config lives: the text model's keys are at the top level of a flat
// config and under text_config in the nested multimodal one.
struct Sources {
  JsonFields root;
  JsonFields text;
  bool nested;
};

// rope_theta / partial_rotary_factor / rope_type: transformers 5 writes them inside
// rope_parameters, older configs at the top level (and rope_scaling for the type).
void read_rope(const Sources& s, ModelConfig& c) {
  std::optional<JsonFields> params;
  if (s.text.has("rope_parameters")) params.emplace(s.text.child("rope_parameters"));
  else if (s.nested && s.root.has("rope_parameters")) params.emplace(s.root.child("rope_parameters"));

  std::optional<double> theta = params ? params->opt_number("rope_theta") : std::nullopt;
  if (!theta) theta = s.text.opt_number("rope_theta");
  if (!theta && s.nested) theta = s.root.opt_number("rope_theta");
  c.rope_theta = theta.value_or(10000.0);

  std::optional<double> partial = params ? params->opt_number("partial_rotary_factor") : std::nullopt;
  const std::optional<double> top_partial = s.text.opt_number("partial_rotary_factor");
  if (partial && top_partial && *partial != *top_partial)
    spdlog::warn("{}: partial_rotary_factor {} at the top level and {} in rope_parameters; using "
                 "rope_parameters (as transformers does)",
                 s.text.file().string(), *top_partial, *partial);
  if (!partial) partial = top_partial;
  if (!partial && s.nested) partial = s.root.opt_number("partial_rotary_factor");
  c.partial_rotary_factor = partial.value_or(c.family->default_partial_rotary_factor);

  std::string type = "default";
  auto type_in = [&](const JsonFields& f) {
    if (auto t = f.opt_string("rope_type")) type = *t;
    else if (auto t2 = f.opt_string("type")) type = *t2;
  };
  if (params) type_in(*params);
  if (s.text.has("rope_scaling")) type_in(s.text.child("rope_scaling"));
  c.rope_type = type;
  if (type != "default")
    throw Error(fmt::format("{}: rope type '{}' is not supported yet (only 'default' RoPE); remove the "
                            "rope scaling block to run within the model's native context",
                            s.text.file().string(), type));
}

bool has_kind(const ModelFamily& family, LayerKind k) {
  return std::find(family.layer_kinds.begin(), family.layer_kinds.end(), k) != family.layer_kinds.end();
}

std::string kind_names(const ModelFamily& family, const char* separator) {
  std::string names;
  for (LayerKind k : family.layer_kinds) names += (names.empty() ? "" : separator) + std::string(layer_kind_name(k));
  return names;
}

// "attention"/"mamba" are transformers' legacy names for the two kinds.
LayerKind parse_layer_kind(const JsonFields& f, const std::string& name, const ModelFamily& family) {
  std::optional<LayerKind> kind;
  if (name == "full_attention" || name == "attention") kind = LayerKind::FullAttention;
  if (name == "linear_attention" || name == "mamba") kind = LayerKind::LinearAttention;
  if (kind && has_kind(family, *kind)) return *kind;
  f.fail("layer_types", fmt::format("contains '{}', which {} does not support (expected {})",
                                    name.size() > 60 ? name.substr(0, 60) + "..." : name, family.name,
                                    kind_names(family, " or ")));
}

void read_layer_types(const JsonFields& text, ModelConfig& c) {
  if (auto names = text.opt_strings("layer_types")) {
    if (static_cast<int64_t>(names->size()) != c.num_layers)
      text.fail("layer_types", fmt::format("has {} entries but num_hidden_layers is {}", names->size(),
                                           c.num_layers));
    for (const auto& n : *names) c.layer_types.push_back(parse_layer_kind(text, n, *c.family));
    return;
  }
  c.family->default_layer_types(text, c);
}

// Features these models could declare that ninfer does not implement: refuse, never ignore.
void refuse_unsupported(const JsonFields& text) {
  if (auto act = text.opt_string("hidden_act"); act && *act != "silu")
    text.fail("hidden_act", fmt::format("is '{}'; only 'silu' is supported", *act));
  if (text.opt_boolean("attention_bias").value_or(false))
    text.fail("attention_bias", "is true; attention projections with biases are not supported");
  if (text.opt_boolean("use_sliding_window").value_or(false))
    text.fail("use_sliding_window", "is true; sliding-window attention is not supported");
  if (text.opt_integer("num_experts").value_or(0) > 0)
    text.fail("num_experts", "is set; mixture-of-experts models are not supported yet");
}

void append_unique(std::vector<int64_t>& dst, const std::vector<int64_t>& src) {
  for (int64_t v : src)
    if (std::find(dst.begin(), dst.end(), v) == dst.end()) dst.push_back(v);
}

void read_token_ids(const Sources& s, const std::filesystem::path& dir, ModelConfig& c) {
  c.bos_token_id = s.text.opt_integer("bos_token_id");
  if (!c.bos_token_id && s.nested) c.bos_token_id = s.root.opt_integer("bos_token_id");
  c.pad_token_id = s.text.opt_integer("pad_token_id");
  if (!c.pad_token_id && s.nested) c.pad_token_id = s.root.opt_integer("pad_token_id");
  append_unique(c.eos_token_ids, s.text.int_or_ints("eos_token_id"));
  if (s.nested) append_unique(c.eos_token_ids, s.root.int_or_ints("eos_token_id"));

  // generation_config.json is optional; when present its eos ids (often a list: <|im_end|>
  // and <|endoftext|>) are what generation stops on.
  const auto gen_path = dir / "generation_config.json";
  if (!std::filesystem::exists(gen_path)) return;
  const ConfigJson gen_json = read_json_file(gen_path);
  const JsonFields gen(gen_json, gen_path);
  append_unique(c.eos_token_ids, gen.int_or_ints("eos_token_id"));
  if (!c.bos_token_id) c.bos_token_id = gen.opt_integer("bos_token_id");
  if (!c.pad_token_id) c.pad_token_id = gen.opt_integer("pad_token_id");
}

ModelConfig parse(const ConfigJson& root_json, const std::filesystem::path& path,
                  const std::filesystem::path& dir) {
  const JsonFields root(root_json, path);
  const auto model_type = root.opt_string("model_type");
  if (!model_type)
    throw Error(fmt::format("{}: key 'model_type' is missing; supported model types: {}", path.string(),
                            supported_model_types_text()));

  ModelConfig c;
  c.config_path = path;
  if (auto arch = root.opt_strings("architectures"); arch && !arch->empty()) c.architecture = arch->front();

  FamilyForm found{};
  try {
    found = model_family_for(*model_type);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path.string(), e.what()));
  }
  const ConfigForm& form = *found.form;
  c.family = found.family;
  const bool nested = form.nested();
  const Sources s{root, nested ? root.child("text_config") : root, nested};
  c.model_type = nested ? s.text.opt_string("model_type").value_or(form.text_model_type) : *model_type;
  if (nested && c.model_type != form.text_model_type)
    s.text.fail("model_type", fmt::format("is '{}'; a {} config's text_config must be {}", c.model_type,
                                          form.model_type, form.text_model_type));
  c.weight_prefix = nested ? "model.language_model." : "model.";
  c.has_vision = nested && root.has("vision_config");

  const JsonFields& t = s.text;
  refuse_unsupported(t);
  c.vocab_size = t.integer("vocab_size");
  c.hidden_size = t.integer("hidden_size");
  c.intermediate_size = t.integer("intermediate_size");
  c.num_layers = t.integer("num_hidden_layers");
  // The layer list is allocated from this count: bound it before anything is.
  if (c.num_layers < 1 || c.num_layers > kMaxLayers)
    t.fail("num_hidden_layers", fmt::format("is {}; it must be between 1 and {}", c.num_layers, kMaxLayers));
  c.num_attention_heads = t.integer("num_attention_heads");
  c.num_key_value_heads = t.opt_integer("num_key_value_heads").value_or(c.num_attention_heads);
  if (c.num_attention_heads <= 0) t.fail("num_attention_heads", "must be positive");
  c.head_dim = t.opt_integer("head_dim").value_or(c.hidden_size / c.num_attention_heads);
  c.rms_norm_eps = t.opt_number("rms_norm_eps").value_or(1e-6);
  c.max_position_embeddings = t.opt_integer("max_position_embeddings").value_or(32768);

  // The outer config owns the tie for a multimodal model; fall back to the text config.
  std::optional<bool> tie = nested ? root.opt_boolean("tie_word_embeddings") : std::nullopt;
  if (!tie) tie = t.opt_boolean("tie_word_embeddings");
  c.tie_word_embeddings = tie.value_or(false);

  read_rope(s, c);
  read_layer_types(t, c);
  if (c.family->read_config) c.family->read_config(t, c);

  std::optional<std::string> dtype = t.opt_string("dtype");
  if (!dtype) dtype = t.opt_string("torch_dtype");
  if (!dtype && nested) dtype = root.opt_string("dtype");
  if (!dtype && nested) dtype = root.opt_string("torch_dtype");
  c.dtype = dtype.value_or("");
  c.mtp_num_hidden_layers = t.opt_integer("mtp_num_hidden_layers").value_or(0);
  c.random_weights = root.opt_boolean("ninfer_random_weights").value_or(false);
  if (const auto q = root_json.find("quantization_config"); q != root_json.end() && !q->is_null())
    c.quantization = parse_quantization_config(*q, path, "quantization_config");
  else if (nested && root_json.at("text_config").contains("quantization_config") &&
           !root_json.at("text_config").at("quantization_config").is_null())
    c.quantization = parse_quantization_config(root_json.at("text_config").at("quantization_config"), path,
                                               "text_config.quantization_config");
  read_token_ids(s, dir, c);
  return c;
}

[[noreturn]] void invalid(const ModelConfig& c, const std::string& what) {
  throw Error(fmt::format("{}: {}", c.config_path.empty() ? std::string("model config") : c.config_path.string(),
                          what));
}

} // namespace

void validate_model_config(const ModelConfig& c) {
  const ModelFamily& family = family_of(c);
  auto positive = [&](const char* key, int64_t v) {
    if (v <= 0) invalid(c, fmt::format("{} must be positive, got {}", key, v));
    // Sizes and counts multiply into tensor shapes (2*heads*head_dim, conv channels x hidden):
    // bounded here, no product of them overflows.
    if (v > kMaxDimension && std::string_view(key) != "max_position_embeddings")
      invalid(c, fmt::format("{} is {}, above the limit of {}", key, v, kMaxDimension));
  };
  positive("vocab_size", c.vocab_size);
  positive("hidden_size", c.hidden_size);
  positive("intermediate_size", c.intermediate_size);
  positive("num_hidden_layers", c.num_layers);
  positive("num_attention_heads", c.num_attention_heads);
  positive("num_key_value_heads", c.num_key_value_heads);
  positive("head_dim", c.head_dim);
  positive("max_position_embeddings", c.max_position_embeddings);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    invalid(c, fmt::format("num_attention_heads ({}) is not a multiple of num_key_value_heads ({})",
                           c.num_attention_heads, c.num_key_value_heads));
  if (!(c.rms_norm_eps > 0)) invalid(c, fmt::format("rms_norm_eps must be positive, got {}", c.rms_norm_eps));
  if (!(c.rope_theta > 0)) invalid(c, fmt::format("rope_theta must be positive, got {}", c.rope_theta));
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1))
    invalid(c, fmt::format("partial_rotary_factor must be in (0, 1], got {}", c.partial_rotary_factor));
  if (c.rotary_dim() <= 0 || c.rotary_dim() % 2 != 0 ||
      std::abs(c.head_dim * c.partial_rotary_factor - static_cast<double>(c.rotary_dim())) > 1e-9)
    invalid(c, fmt::format("head_dim {} x partial_rotary_factor {} must be a positive even whole number",
                           c.head_dim, c.partial_rotary_factor));
  if (static_cast<int64_t>(c.layer_types.size()) != c.num_layers)
    invalid(c, fmt::format("layer_types has {} entries but num_hidden_layers is {}", c.layer_types.size(),
                           c.num_layers));
  for (LayerKind k : {LayerKind::FullAttention, LayerKind::LinearAttention})
    if (c.num_layers_of(k) > 0 && !has_kind(family, k))
      invalid(c, fmt::format("a {} model has only {} layers", family.flat_form().model_type,
                             kind_names(family, " and ")));
  const int64_t linear = c.num_layers_of(LayerKind::LinearAttention);
  if (linear > 0) {
    positive("linear_num_key_heads", c.linear_num_key_heads);
    positive("linear_num_value_heads", c.linear_num_value_heads);
    positive("linear_key_head_dim", c.linear_key_head_dim);
    positive("linear_value_head_dim", c.linear_value_head_dim);
    positive("linear_conv_kernel_dim", c.linear_conv_kernel_dim);
    if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
      invalid(c, fmt::format("linear_num_value_heads ({}) is not a multiple of linear_num_key_heads ({})",
                             c.linear_num_value_heads, c.linear_num_key_heads));
  }
  for (int64_t id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size)
      spdlog::warn("{}: eos token id {} is outside the vocabulary (vocab_size {})", c.config_path.string(), id,
                   c.vocab_size);
}

ModelConfig load_model_config(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir))
    throw Error(fmt::format("checkpoint folder {} does not exist (or is not a folder)", dir.string()));
  const auto path = dir / "config.json";
  if (!std::filesystem::exists(path))
    throw Error(fmt::format("{}: missing; a Hugging Face checkpoint folder holds config.json next to its "
                            "model.safetensors (or model.safetensors.index.json)",
                            path.string()));
  const ConfigJson root = read_json_file(path);
  ModelConfig c = parse(root, path, dir);
  validate_model_config(c);
  return c;
}

} // namespace ninfer
