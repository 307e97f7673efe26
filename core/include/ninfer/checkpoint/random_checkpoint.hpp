// Random-weight checkpoints: small presets of the registered model families (with the real Qwen3
// vocabulary, so the real tokenizer drives them) whose weights are drawn from a seeded,
// deterministic initialisation. They let the runtime run end to end on a fresh machine with
// nothing downloaded; their output is meaningless and every tool says so.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/model_config.hpp"

namespace ninfer {

struct RandomPreset {
  std::string name;
  std::string description;
};
// Every registered family's random presets (ninfer/checkpoint/model_family.hpp).
const std::vector<RandomPreset>& random_checkpoint_presets();

// The preset's config, with the Qwen3 tokenizer's special-token ids. Throws listing the presets.
ModelConfig random_checkpoint_config(const std::string& preset);

// What every random preset starts from: `family` (its flat form), CPU-sized widths (hidden 256,
// 4/2 heads of 64, MLP 768), tied embeddings, and the vocabulary and special tokens of the Qwen3
// tokenizer the checkpoint ships with. A family's preset sets its layers and own keys.
ModelConfig random_preset_base(const ModelFamily& family);

// config.json text (flat Hugging Face form) for a config; marks it "ninfer_random_weights"
// when `random_weights` is set.
std::string config_json_text(const ModelConfig& cfg, DType dtype);

// The initialisation of one tensor, deterministic in (seed, tensor name):
//   Embedding / Linear        normal(0, 0.02)
//   RmsNormWeight             1 + normal(0, 0.02)
//   RmsNormOffsetWeight       normal(0, 0.02)            (Qwen3.5 scales by 1 + w)
//   Conv1dWeight              uniform(-1/sqrt(k), 1/sqrt(k)), k = kernel size (PyTorch's default)
//   ALog                      log(uniform(1, 16))
//   DtBias                    softplus^-1(dt), dt log-uniform in [1e-3, 1e-1] (Mamba's init)
class TensorInit {
 public:
  TensorInit(const ExpectedTensor& e, uint64_t seed);
  void next(float* out, size_t n); // the next n values of the flattened tensor
  // Positions the stream at element `index`: next() then gives what a fresh stream gives from
  // there, so a tensor can be filled in pieces by several threads.
  void seek(uint64_t index);

 private:
  double uniform();  // (0, 1)
  double normal();
  TensorRole role_;
  double conv_bound_ = 0;
  uint64_t state_, start_; // splitmix64 counter now / at element 0
  bool have_spare_ = false;
  double spare_ = 0;
};
std::vector<float> random_tensor_values(const ExpectedTensor& e, uint64_t seed);

struct RandomCheckpointOptions {
  std::string preset;
  uint64_t seed = 0;
  DType dtype = DType::F32;       // F32 or BF16
  std::filesystem::path out;      // the checkpoint folder to create
  std::filesystem::path tokenizer; // tokenizer.json; tokenizer_config.json is taken from its folder
  bool force = false;             // replace `out` if it is an earlier random checkpoint
  // When set, written instead of the preset's config (tests and tools that need another
  // size); `preset` then only labels the README.
  std::optional<ModelConfig> config;
};

struct RandomCheckpointSummary {
  ModelConfig config;
  std::filesystem::path dir;
  int64_t parameters = 0;
  size_t weight_bytes = 0;
};

// Writes config.json, model.safetensors, generation_config.json, README.md and copies of the
// tokenizer files into opt.out, atomically: everything goes to a hidden sibling folder that is
// renamed into place at the end, so a failure leaves nothing behind. Throws ninfer::Error.
RandomCheckpointSummary write_random_checkpoint(const RandomCheckpointOptions& opt);

} // namespace ninfer
