// quantization_config of config.json: one parser per published format, each refusing (with the
// key path) what ninfer does not read rather than loading it wrong.
#include "ninfer/checkpoint/quantization_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <regex>

#include "ninfer/checkpoint/json_fields.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {

const char* quant_method_name(QuantMethod m) {
  switch (m) {
    case QuantMethod::Gptq: return "gptq";
    case QuantMethod::Awq: return "awq";
    case QuantMethod::CompressedTensors: return "compressed-tensors";
    case QuantMethod::Fp8Block: return "fp8";
  }
  return "?";
}

const char* supported_quant_formats() {
  return "gptq (4 or 8 bits, checkpoint_format gptq or gptq_v2), awq (version gemm, 4 bits), "
         "compressed-tensors (format pack-quantized, int4 or int8 weights) and fp8 (e4m3 with "
         "weight_block_size)";
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// What a quant_method ninfer does not read is, for the message.
std::string unsupported_method_note(const std::string& m) {
  const std::string l = lower(m);
  if (l == "modelopt" || l.find("nvfp4") != std::string::npos) return " (ModelOpt / NVFP4)";
  if (l == "gguf") return " (GGUF)";
  if (l == "exl2" || l == "exl3") return " (ExLlama)";
  if (l == "bitsandbytes") return " (bitsandbytes)";
  return "";
}

int32_t read_bits(const JsonFields& f, const std::string& key, const char* format) {
  const int64_t bits = f.integer(key);
  if (bits != 4 && bits != 8)
    f.fail(key, fmt::format("is {}; ninfer reads {} weights of 4 or 8 bits (2-, 3- and other widths are not "
                            "supported)",
                            bits, format));
  return static_cast<int32_t>(bits);
}

// group_size: -1 (or 0) means one group per row.
int64_t read_group(const JsonFields& f, const std::string& key, int64_t fallback) {
  const int64_t g = f.opt_integer(key).value_or(fallback);
  if (g < -1) f.fail(key, fmt::format("is {}; a group size is positive, or -1 for one group per row", g));
  return g <= 0 ? 0 : g;
}

std::vector<std::string> string_list(const JsonFields& f, const std::string& key) {
  return f.opt_strings(key).value_or(std::vector<std::string>{});
}

void parse_gptq(const ConfigJson& q, const JsonFields& f, QuantizationConfig& c) {
  c.scheme.bits = read_bits(f, "bits", "GPTQ");
  c.scheme.group_size = read_group(f, "group_size", -1);
  c.scheme.symmetric = f.opt_boolean("sym").value_or(true);
  c.gptq_lm_head = f.opt_boolean("lm_head").value_or(false);
  const std::string key = f.has("checkpoint_format") ? "checkpoint_format" : "format";
  const std::string format = f.opt_string(key).value_or("gptq");
  if (format == "gptq_v2") c.gptq_v2 = true;
  else if (format != "gptq")
    f.fail(key, fmt::format("is '{}'; ninfer reads GPTQ checkpoints in format gptq or gptq_v2 (a kernel-specific "
                            "layout such as marlin or bitblas is not read)",
                            format));
  const auto d = q.find("dynamic");
  if (d == q.end() || d->is_null()) return;
  if (!d->is_object()) f.fail("dynamic", "must be an object mapping module patterns to overrides");
  const JsonFields dyn = f.child("dynamic");
  for (const auto& [pattern, body] : d->items()) { // in the file's order: the first rule a module matches decides
    QuantizationConfig::Override o;
    if (pattern.rfind("-:", 0) == 0) {
      o.exclude = true;
      o.pattern = pattern.substr(2);
    } else {
      o.pattern = pattern.rfind("+:", 0) == 0 ? pattern.substr(2) : pattern;
    }
    try {
      (void)std::regex(o.pattern);
    } catch (const std::regex_error& e) {
      dyn.fail(pattern, fmt::format("is not a regular expression ninfer can read ({})", e.what()));
    }
    if (!body.is_object()) dyn.fail(pattern, "must be an object of overrides (bits, group_size, sym)");
    const JsonFields b = dyn.child(pattern);
    if (b.has("bits")) o.bits = read_bits(b, "bits", "GPTQ");
    if (b.has("group_size")) o.group_size = read_group(b, "group_size", -1);
    o.symmetric = b.opt_boolean("sym");
    c.dynamic.push_back(std::move(o));
  }
}

void parse_awq(const JsonFields& f, QuantizationConfig& c) {
  const std::string bits_key = f.has("bits") ? "bits" : "w_bit";
  c.scheme.bits = static_cast<int32_t>(f.integer(bits_key));
  if (c.scheme.bits != 4)
    f.fail(bits_key, fmt::format("is {}; ninfer reads AWQ GEMM checkpoints of 4 bits", c.scheme.bits));
  c.scheme.group_size = read_group(f, f.has("group_size") ? "group_size" : "q_group_size", -1);
  const std::string version = lower(f.opt_string("version").value_or("gemm"));
  if (version != "gemm")
    f.fail("version", fmt::format("is '{}'; ninfer reads AWQ checkpoints of version gemm (gemv, gemv_fast, "
                                  "marlin and exllama layouts are not read)",
                                  version));
  const std::string zp_key = f.has("zero_point") ? "zero_point" : "zero_points";
  if (!f.opt_boolean(zp_key).value_or(true))
    f.fail(zp_key, "is false; ninfer reads AWQ checkpoints with zero points");
  c.scheme.symmetric = false;
  c.not_converted = string_list(f, "modules_to_not_convert");
}

QuantScheme parse_ct_weights(const JsonFields& w) {
  QuantScheme s;
  const std::string type = w.opt_string("type").value_or("int");
  if (type != "int")
    w.fail("type", fmt::format("is '{}'; ninfer reads compressed-tensors integer weights (pack-quantized)", type));
  s.bits = read_bits(w, "num_bits", "compressed-tensors");
  s.symmetric = w.opt_boolean("symmetric").value_or(true);
  const std::string strategy = w.opt_string("strategy").value_or("group");
  if (strategy == "group") {
    s.group_size = w.integer("group_size");
    if (s.group_size < 1) w.fail("group_size", "must be positive for strategy group");
  } else if (strategy == "channel") {
    s.group_size = 0;
  } else {
    w.fail("strategy", fmt::format("is '{}'; ninfer reads strategy group or channel", strategy));
  }
  if (w.opt_boolean("dynamic").value_or(false)) w.fail("dynamic", "is true; weights must have stored scales");
  return s;
}

void parse_compressed_tensors(const ConfigJson& q, const JsonFields& f, QuantizationConfig& c) {
  const std::string format = f.opt_string("format").value_or("");
  if (format != "pack-quantized")
    f.fail("format", fmt::format("is '{}'; ninfer reads compressed-tensors format pack-quantized ({})", format,
                                 supported_quant_formats()));
  if (auto status = f.opt_string("quantization_status"); status && *status != "compressed")
    f.fail("quantization_status", fmt::format("is '{}'; only compressed (packed) checkpoints hold packed weights",
                                              *status));
  c.ignore = string_list(f, "ignore");
  for (const auto& pattern : c.ignore)
    if (pattern.rfind("re:", 0) == 0) {
      try {
        (void)std::regex(pattern.substr(3));
      } catch (const std::regex_error& e) {
        f.fail("ignore", fmt::format("holds '{}', not a regular expression ninfer can read ({})", pattern, e.what()));
      }
    }
  const auto groups = q.find("config_groups");
  if (groups == q.end() || !groups->is_object() || groups->empty())
    f.fail("config_groups", "must be an object of quantization groups");
  const JsonFields gf = f.child("config_groups");
  for (const auto& item : groups->items()) {
    const std::string name = item.key();
    const JsonFields g = gf.child(name);
    if (auto fmt_key = g.opt_string("format"); fmt_key && *fmt_key != "pack-quantized")
      g.fail("format", fmt::format("is '{}'; ninfer reads pack-quantized groups", *fmt_key));
    if (g.has("input_activations"))
      g.fail("input_activations", "is set; activation quantization is not supported (weight-only schemes are)");
    if (g.has("output_activations"))
      g.fail("output_activations", "is set; activation quantization is not supported (weight-only schemes are)");
    QuantizationConfig::Group group;
    group.name = name;
    group.targets = string_list(g, "targets");
    if (group.targets.empty()) g.fail("targets", "is missing or empty");
    group.scheme = parse_ct_weights(g.child("weights"));
    c.groups.push_back(std::move(group));
  }
}

void parse_fp8(const ConfigJson& q, const JsonFields& f, QuantizationConfig& c) {
  const std::string fmt_name = f.opt_string("fmt").value_or("e4m3");
  if (fmt_name != "e4m3") f.fail("fmt", fmt::format("is '{}'; ninfer reads FP8 e4m3 weights", fmt_name));
  if (auto a = f.opt_string("activation_scheme"); a && *a != "dynamic")
    f.fail("activation_scheme", fmt::format("is '{}'; ninfer reads FP8 checkpoints of activation_scheme dynamic "
                                            "(weight-only use)",
                                            *a));
  const auto b = q.find("weight_block_size");
  if (b == q.end() || b->is_null())
    f.fail("weight_block_size", "is missing; ninfer reads FP8 checkpoints with block scales (per-tensor FP8 is not "
                                "supported)");
  if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() || !(*b)[1].is_number_integer() ||
      (*b)[0].get<int64_t>() < 1 || (*b)[1].get<int64_t>() < 1 || (*b)[0].get<int64_t>() > (1 << 20) ||
      (*b)[1].get<int64_t>() > (1 << 20))
    f.fail("weight_block_size", fmt::format("is {}; expected [rows, columns] of a block, two positive integers",
                                            shown(*b)));
  c.scheme.bits = 8;
  c.scheme.block_rows = (*b)[0].get<int64_t>();
  c.scheme.block_cols = (*b)[1].get<int64_t>();
  c.scheme.group_size = c.scheme.block_cols;
  c.not_converted = string_list(f, "modules_to_not_convert");
}

// Python's re.match: the pattern anchored at the start of the name, not at its end.
bool re_match(const std::string& pattern, const std::string& name) {
  return std::regex_search(name, std::regex("^(?:" + pattern + ")"));
}

// A target naming the module, or a "re:" pattern matching it (not the class name "Linear").
bool ct_names(const std::string& target, const std::string& module) {
  if (target.rfind("re:", 0) == 0) return re_match(target.substr(3), module);
  return target == module;
}

} // namespace

QuantizationConfig parse_quantization_config(const ConfigJson& q, const std::filesystem::path& file,
                                             const std::string& key) {
  const JsonFields f(q, file, key);
  QuantizationConfig c;
  c.file = file;
  c.key = key;
  const auto method = f.opt_string("quant_method");
  if (!method) f.fail("quant_method", fmt::format("is missing; ninfer reads {}", supported_quant_formats()));
  const std::string m = lower(*method);
  if (m == "gptq") {
    c.method = QuantMethod::Gptq;
    parse_gptq(q, f, c);
  } else if (m == "awq") {
    c.method = QuantMethod::Awq;
    parse_awq(f, c);
  } else if (m == "compressed-tensors") {
    c.method = QuantMethod::CompressedTensors;
    parse_compressed_tensors(q, f, c);
  } else if (m == "fp8") {
    c.method = QuantMethod::Fp8Block;
    parse_fp8(q, f, c);
  } else {
    f.fail("quant_method", fmt::format("is '{}'{}, a format ninfer does not read; ninfer reads {}", *method,
                                       unsupported_method_note(*method), supported_quant_formats()));
  }
  return c;
}

std::string QuantizationConfig::where() const { return fmt::format("{}: key '{}'", file.string(), key); }

std::optional<QuantScheme> QuantizationConfig::scheme_for(const std::string& module) const {
  switch (method) {
    case QuantMethod::Gptq: {
      if (module == "lm_head" && !gptq_lm_head) return std::nullopt;
      QuantScheme s = scheme;
      for (const Override& o : dynamic) {
        if (!re_match(o.pattern, module)) continue;
        if (o.exclude) return std::nullopt;
        if (o.bits) s.bits = *o.bits;
        if (o.group_size) s.group_size = *o.group_size;
        if (o.symmetric) s.symmetric = *o.symmetric;
        break;
      }
      return s;
    }
    case QuantMethod::Awq:
    case QuantMethod::Fp8Block:
      for (const auto& n : not_converted)
        if (!n.empty() && module.find(n) != std::string::npos) return std::nullopt;
      return scheme;
    case QuantMethod::CompressedTensors:
      for (const auto& i : ignore)
        if (ct_names(i, module)) return std::nullopt;
      // A group naming the module (by name or pattern) over one targeting every "Linear", as
      // compressed-tensors and vLLM match: a role given bits of its own sits in a later group.
      for (const Group& g : groups)
        for (const auto& t : g.targets)
          if (ct_names(t, module)) return g.scheme;
      for (const Group& g : groups)
        for (const auto& t : g.targets)
          if (t == "Linear") return g.scheme;
      return std::nullopt;
  }
  return std::nullopt;
}

} // namespace ninfer
