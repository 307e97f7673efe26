#include "ninfer/manifest/manifest.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "ninfer/support/error.hpp"
#include "ninfer/support/paths.hpp"
#include "ninfer/support/yaml_schema.hpp"
#include "schema_explain.hpp"

namespace ninfer {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Validation by the schema; on failure, a plain-language explanation of the same problem
// when schema_explain finds it, else the validator's own message.
YAML::Node load_checked(const std::string& text, const fs::path& file, const fs::path& schema_file) {
  try {
    return parse_validated_yaml(text, file.string(), schema_file);
  } catch (const Error&) {
    std::optional<std::string> better;
    try {
      const YAML::Node root = parse_yaml(text, file.string());
      const nlohmann::json schema = nlohmann::json::parse(read_text(schema_file));
      better = explain_schema_violation(root, schema, file.string());
    } catch (const std::exception&) {
      // Syntax errors, documents over a limit and unreadable schemas: the original message
      // already says it best.
    }
    if (better) throw Error(*better);
    throw;
  }
}

// `p` as written in a manifest: relative to the manifest's folder, normalised, without a
// trailing separator (so filename() is the folder's name).
fs::path resolve(const fs::path& base, const std::string& p) {
  fs::path r = fs::path(p).is_absolute() ? fs::path(p) : base / p;
  r = r.lexically_normal();
  if (!r.has_filename() && r.has_parent_path()) r = r.parent_path();
  return r;
}

fs::path require_folder(const fs::path& dir, const std::string& where_prefix, const std::string& fix) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec && st.type() != fs::file_type::not_found)  // e.g. a name too long for the file system
    throw Error(fmt::format("{}cannot use {}: {}", where_prefix, shortened_value(dir.string(), 200), ec.message()));
  if (!fs::exists(st))
    throw Error(fmt::format("{}folder not found: {}{}", where_prefix, dir.string(), fix));
  if (!fs::is_directory(st))
    throw Error(fmt::format("{}checkpoint must be a folder (a Hugging Face checkpoint with config.json "
                            "and *.safetensors), but {} is a file",
                            where_prefix, dir.string()));
  return dir;
}

std::optional<fs::path> default_tokenizer(const fs::path& checkpoint) {
  fs::path t = checkpoint / "tokenizer.json";
  std::error_code ec;
  if (fs::is_regular_file(t, ec)) return t;
  return std::nullopt;
}

template <class E, size_t N>
E parse_enum(const std::string& s, const std::pair<const char*, E> (&table)[N]) {
  for (const auto& [name, value] : table)
    if (s == name) return value;
  throw Error("unreachable: value passed the schema but has no enum entry: " + s);
}

constexpr std::pair<const char*, WeightDType> kWeightDTypes[] = {
    {"auto", WeightDType::Auto}, {"float32", WeightDType::Float32},
    {"bfloat16", WeightDType::BFloat16}, {"float16", WeightDType::Float16}};
constexpr std::pair<const char*, KvDType> kKvDTypes[] = {
    {"auto", KvDType::Auto}, {"float32", KvDType::Float32}, {"float16", KvDType::Float16},
    {"bfloat16", KvDType::BFloat16}, {"int8", KvDType::Int8}, {"fp8", KvDType::Fp8}, {"int4r", KvDType::Int4r}};
constexpr std::pair<const char*, ChatTemplate> kChatTemplates[] = {{"qwen", ChatTemplate::Qwen},
                                                                   {"none", ChatTemplate::None}};
constexpr std::pair<const char*, SpecKind> kSpecKinds[] = {{"none", SpecKind::None}, {"mtp", SpecKind::Mtp}};
constexpr std::pair<const char*, DraftHeadKind> kDraftHeads[] = {{"lm_head", DraftHeadKind::LmHead},
                                                                 {"int4", DraftHeadKind::Int4}};

template <class E, size_t N>
const char* enum_name(E e, const std::pair<const char*, E> (&table)[N]) {
  for (const auto& [name, value] : table)
    if (e == value) return name;
  return "?";
}

void read_runtime(const YAML::Node& n, RuntimeOptions& r) {
  if (!n) return;
  if (n["max_context"]) r.max_context = n["max_context"].as<int64_t>();
  if (n["max_concurrency"]) r.max_concurrency = n["max_concurrency"].as<int64_t>();
  if (n["prefill_chunk"]) r.prefill_chunk = n["prefill_chunk"].as<int64_t>();
  if (n["mixed_chunk"]) r.mixed_chunk = n["mixed_chunk"].as<int64_t>();
  if (n["kv_dtype"]) r.kv_dtype = parse_enum(n["kv_dtype"].as<std::string>(), kKvDTypes);
  if (n["cuda_graphs"]) r.cuda_graphs = n["cuda_graphs"].as<bool>();
  if (n["memory_limit"]) r.memory_limit_gib = n["memory_limit"].as<double>();
  if (n["kv_capacity"] && n["kv_capacity"].Scalar() != "auto") r.kv_capacity = n["kv_capacity"].as<int64_t>();
  if (n["kv_block_tokens"]) r.kv_block_tokens = n["kv_block_tokens"].as<int64_t>();
}

void read_spec(const YAML::Node& n, SpecSettings& s) {
  if (!n) return;
  if (n["method"]) s.method = parse_enum(n["method"].as<std::string>(), kSpecKinds);
  if (n["draft_tokens"]) s.draft_tokens = n["draft_tokens"].as<int64_t>();
  if (n["draft_vocab"]) s.draft_vocab = n["draft_vocab"].as<int64_t>();
  if (n["draft_head"]) s.draft_head = parse_enum(n["draft_head"].as<std::string>(), kDraftHeads);
  if (n["max_batch"]) s.max_batch = n["max_batch"].as<int64_t>();
}

void read_sampling(const YAML::Node& n, Manifest& m) {
  if (!n) return;
  SamplingParams& s = m.sampling;
  if (n["temperature"]) s.temperature = n["temperature"].as<double>();
  if (n["top_p"]) s.top_p = n["top_p"].as<double>();
  if (n["top_k"]) s.top_k = n["top_k"].as<int64_t>();
  if (n["min_p"]) s.min_p = n["min_p"].as<double>();
  if (n["repetition_penalty"]) s.repetition_penalty = n["repetition_penalty"].as<double>();
  if (n["presence_penalty"]) s.presence_penalty = n["presence_penalty"].as<double>();
  if (n["frequency_penalty"]) s.frequency_penalty = n["frequency_penalty"].as<double>();
  if (n["seed"]) s.seed = n["seed"].as<uint64_t>();
  if (n["max_new_tokens"]) m.max_new_tokens = n["max_new_tokens"].as<int64_t>();
}

void record_locations(const YAML::Node& n, const std::string& origin, const std::string& prefix,
                      std::map<std::string, std::string>& out) {
  if (!n.IsMap()) return;
  for (const auto& kv : n) {
    const std::string key = prefix + kv.first.as<std::string>();
    out[key] = where(origin, kv.first);
    record_locations(kv.second, origin, key + ".", out);
  }
}

} // namespace

std::string Manifest::where(const std::string& key) const {
  if (auto it = locations.find(key); it != locations.end()) return it->second + ": " + key;
  if (source.empty()) return fmt::format("--checkpoint {}: {} (default)", checkpoint.string(), key);
  return fmt::format("{}: {} (default)", source.string(), key);
}

const char* to_string(WeightDType d) { return enum_name(d, kWeightDTypes); }
const char* to_string(KvDType d) { return enum_name(d, kKvDTypes); }
const char* to_string(ChatTemplate t) { return enum_name(t, kChatTemplates); }
const char* to_string(SpecKind k) { return enum_name(k, kSpecKinds); }
const char* to_string(DraftHeadKind d) { return enum_name(d, kDraftHeads); }

Manifest load_manifest(const fs::path& file) {
  return load_manifest(file, data_dir() / "schemas" / "manifest.schema.json");
}

Manifest load_manifest(const fs::path& file, const fs::path& schema_file) {
  return parse_manifest(read_yaml_file(file), file, schema_file);
}

Manifest parse_manifest(const std::string& text, const fs::path& file, const fs::path& schema_file) {
  const YAML::Node root = load_checked(text, file, schema_file);
  const std::string origin = file.string();
  const fs::path base = fs::absolute(file).parent_path();

  Manifest m;
  m.source = file;
  record_locations(root, origin, "", m.locations);
  const YAML::Node ck = root["checkpoint"];
  m.checkpoint = require_folder(
      resolve(base, ck.as<std::string>()), where(origin, ck) + ": checkpoint: ",
      fmt::format(" (written as '{}', relative to the manifest's folder {}); fix the path or "
                  "download the checkpoint there",
                  ck.as<std::string>(), base.string()));
  m.name = root["name"] ? root["name"].as<std::string>() : m.checkpoint.filename().string();
  if (root["dtype"]) m.dtype = parse_enum(root["dtype"].as<std::string>(), kWeightDTypes);
  if (const YAML::Node t = root["tokenizer"]) {
    const fs::path p = resolve(base, t.as<std::string>());
    std::error_code ec;
    if (!fs::is_regular_file(p, ec))
      throw Error(fmt::format("{}: tokenizer: file not found: {} (written as '{}', relative to the "
                              "manifest's folder); point it at a tokenizer.json or remove the key to "
                              "use <checkpoint>/tokenizer.json",
                              where(origin, t), p.string(), t.as<std::string>()));
    m.tokenizer = p;
  } else {
    m.tokenizer = default_tokenizer(m.checkpoint);
  }
  if (root["chat_template"])
    m.chat_template = parse_enum(root["chat_template"].as<std::string>(), kChatTemplates);
  read_runtime(root["runtime"], m.runtime);
  read_spec(root["spec"], m.spec);
  read_sampling(root["sampling"], m);
  try {
    m.sampling.validate(); // the schema has the same ranges; this keeps the two honest
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", where(origin, root["sampling"]), e.what()));
  }
  return m;
}

Manifest implicit_manifest(const fs::path& checkpoint_dir) {
  Manifest m;
  m.checkpoint = require_folder(resolve(fs::current_path(), checkpoint_dir.string()), "--checkpoint: ",
                                " (relative paths are resolved from the working directory)");
  m.name = m.checkpoint.filename().string();
  m.tokenizer = default_tokenizer(m.checkpoint);
  return m;
}

} // namespace ninfer
