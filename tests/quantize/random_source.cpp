#include "random_source.hpp"

#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>

#include "quant_oracle.hpp"
#include "test_support.hpp"

namespace ninfer::test {

namespace fs = std::filesystem;

std::string encode_value(double value, const std::string& dtype) {
  std::string out;
  auto put = [&](uint64_t bits, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  };
  if (dtype == "F32" || dtype == "BF16") {
    const float f = static_cast<float>(value);
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if (dtype == "F32") put(x, 4);
    else put(x >> 16, 2); // value is a bf16, so the low half is zero
    return out;
  }
  // F16 from the definition: sign, exponent field, fraction.
  uint16_t h = value < 0 || (value == 0 && std::signbit(value)) ? 0x8000 : 0;
  const double a = std::fabs(value);
  if (a != 0) {
    int e;
    std::frexp(a, &e);
    if (e - 1 < -14) h |= static_cast<uint16_t>(std::ldexp(a, 24)); // subnormal: a / 2^-24
    else h |= static_cast<uint16_t>(((e - 1 + 15) << 10) | (static_cast<uint32_t>(std::ldexp(a, 11 - e)) - 1024));
  }
  put(h, 2);
  return out;
}

SourceCheckpoint make_source_checkpoint(const std::string& fixture, const std::string& dtype, std::mt19937_64& rng,
                                        const fs::path& dir, bool sharded) {
  SourceCheckpoint src;
  src.dir = dir;
  fs::create_directories(dir);
  copy_fixture_config(fixture, dir);
  src.config = read_json(dir / "config.json");
  const RawTensors shapes = read_raw_safetensors(fixtures_dir() / fixture / "model.safetensors");
  std::normal_distribution<double> normal(0.0, 0.02);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (const auto& [name, t] : shapes) {
    RawTensor out;
    out.dtype = dtype;
    out.shape = t.shape;
    const int64_t cols = t.shape.size() == 2 ? t.shape[1] : 1;
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    for (size_t i = 0; i < n; ++i) {
      const int64_t row = static_cast<int64_t>(i) / cols, col = static_cast<int64_t>(i) % cols;
      double v = normal(rng);
      if (row % 11 == 3) v *= 40;                 // outlier rows
      if (row % 13 == 5) v *= 1e-6;               // scales below float16's normal range
      if (row % 17 == 7 && col < 16) v = 0;       // an all-zero group
      if (unit(rng) < 0.01) v = -v * 9;           // scattered outliers
      out.bytes += encode_value(round_to_format(v, dtype), dtype);
    }
    src.tensors[name] = std::move(out);
  }
  if (sharded) {
    RawTensors a, b;
    nlohmann::json map = nlohmann::json::object();
    size_t i = 0;
    for (const auto& [name, t] : src.tensors) {
      const bool first = i++ % 2 == 0;
      (first ? a : b)[name] = t;
      map[name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    write_raw_safetensors(dir / "model-00001-of-00002.safetensors", a);
    write_raw_safetensors(dir / "model-00002-of-00002.safetensors", b);
    write_json(dir / "model.safetensors.index.json", {{"metadata", {{"total_size", 0}}}, {"weight_map", map}});
  } else {
    write_raw_safetensors(dir / "model.safetensors", src.tensors);
  }
  write_json(dir / "tokenizer.json", {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", nlohmann::json::array()}}}});
  write_json(dir / "tokenizer_config.json", {{"eos_token", "<|im_end|>"}});
  write_file_bytes(dir / "chat_template.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}\n");
  return src;
}

namespace {

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else { // the byte-level alphabet stays below U+0800
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

} // namespace

void write_byte_level_tokenizer(const fs::path& dir) {
  // GPT-2's byte-to-character table from its definition: printable bytes stand for themselves,
  // the others take U+0100.. in order.
  nlohmann::json vocab = nlohmann::json::object();
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    vocab[utf8(printable ? static_cast<char32_t>(b) : next++)] = b;
  }
  const nlohmann::json tok = {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
  };
  write_json(dir / "tokenizer.json", tok);
}

std::string lexicon_text(std::mt19937_64& rng, int words) {
  static const char* kLexicon[] = {"the",   "river", "stone", "light", "quiet", "north", "garden", "over",
                                   "under", "bright", "cold",  "song",  "we",    "carry", "slowly", "and",
                                   "a",     "field", "of",    "grain", "winter", "hand",  "open",   "door"};
  std::uniform_int_distribution<size_t> pick(0, std::size(kLexicon) - 1);
  std::uniform_int_distribution<int> sentence(4, 12);
  std::string text;
  int left = sentence(rng);
  for (int i = 0; i < words; ++i) {
    text += kLexicon[pick(rng)];
    if (--left == 0) {
      text += ". ";
      left = sentence(rng);
    } else {
      text += ' ';
    }
  }
  return text;
}

std::vector<std::string> side_files() {
  return {"generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"};
}

ProcessOutput run_quantize(const std::vector<std::string>& args, const std::string& env) {
  std::string cmd = env.empty() ? "" : env + " ";
  cmd += shell_quote(NINFER_QUANTIZE_BIN);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  return run_process(cmd);
}

RawTensors read_output_tensors(const fs::path& dir) {
  if (!fs::exists(dir / "model.safetensors.index.json")) return read_raw_safetensors(dir / "model.safetensors");
  RawTensors all;
  const auto index = read_json(dir / "model.safetensors.index.json");
  std::set<std::string> files;
  for (const auto& [name, file] : index["weight_map"].items()) files.insert(file.get<std::string>());
  for (const auto& f : files)
    for (auto& [name, t] : read_raw_safetensors(dir / f)) all[name] = std::move(t);
  return all;
}

} // namespace ninfer::test
