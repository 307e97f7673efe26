// ninfer-quantize's work: read a float checkpoint (bf16 / fp16 / fp32, one file or shards)
// through its memory map, quantize the linear weights the recipe names one tensor at a time
// (round to nearest, or GPTQ from the Hessians of activations the runtime computes on
// calibration text), copy everything else unchanged, and write a quantized checkpoint in a
// standard layout into a staging folder that is renamed into place only when complete
// (docs/ninfer-quantize.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "ninfer/quantize/recipe.hpp"

namespace ninfer {

// GPTQ's calibration: the text, how it is cut and where the float model runs on it.
struct CalibrationOptions {
  std::filesystem::path file;      // --calibration: UTF-8 text, read with the checkpoint's tokenizer
  int64_t tokens = 512;            // --calibration-tokens: tokens per sample (one sequence each)
  int64_t samples = 128;           // --calibration-samples: most samples (fewer if the text is shorter)
  std::string device = "cpu";      // --device: cpu, cuda, cuda:N or auto
  std::string plugin_dir;          // --plugin-dir; empty: the default
  uint64_t hessian_memory = 16'000'000'000; // --hessian-memory: most bytes of Hessians held at once
  int64_t layers_per_pass = 0;     // --calibration-layers-per-pass; 0: as many as hessian_memory allows
};

struct QuantizeOptions {
  std::filesystem::path checkpoint; // input folder
  std::filesystem::path out;        // output folder (must not exist unless force)
  Recipe recipe = default_recipe();
  bool force = false;
  uint64_t max_shard_bytes = 4'000'000'000; // data bytes per output shard
  bool progress = true;                     // progress lines on stderr
  CalibrationOptions calibration;           // method gptq only (calibration.file required)
};

struct QuantizeSummary {
  std::filesystem::path out;
  size_t tensors_in = 0;
  size_t modules_quantized = 0;
  size_t tensors_copied = 0;
  size_t shards = 0;
  uint64_t bytes_in = 0;  // tensor data read
  uint64_t bytes_out = 0; // tensor data written
  double seconds = 0;
};

// Throws ninfer::Error naming the file, tensor or recipe line and the problem; on any error the
// output folder is left as it was (absent, or the old one with --force). Method gptq needs
// calibration.file, method rtn refuses it.
// NINFER_QUANTIZE_TEST_KILL_AFTER=N kills the process (SIGKILL) once N input tensors are
// written, so tests can check what a killed run leaves.
QuantizeSummary quantize_checkpoint(const QuantizeOptions& options);

} // namespace ninfer
