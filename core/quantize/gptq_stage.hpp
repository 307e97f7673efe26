// GPTQ's part of ninfer-quantize: the float model loaded on the device, the calibration text
// cut into samples, then per pass (hessian_inputs.hpp) the samples run through the model while
// a HessianCollector accumulates the pass's Hessians, and each module of the pass solved
// (gptq.hpp) and its output tensors set aside in a scratch folder until the writer reaches it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ninfer/quantize/quantize_checkpoint.hpp"
#include "ninfer/quantize/quantize_plan.hpp"

namespace ninfer::quantize_detail {

// The packed tensors of each solved module, one file each in a folder of the staging folder;
// read once (the file is then removed).
class GptqResults {
 public:
  explicit GptqResults(std::filesystem::path dir);
  ~GptqResults(); // removes the folder
  GptqResults(const GptqResults&) = delete;
  GptqResults& operator=(const GptqResults&) = delete;
  void write(const std::string& module, const std::vector<std::string>& parts);
  std::vector<std::string> read(const std::string& module) const;

 private:
  std::filesystem::path file(const std::string& module) const;
  std::filesystem::path dir_;
};

class GptqStage {
 public:
  // Checks the options, reads and tokenizes the calibration text and loads the float checkpoint
  // at `checkpoint` on the device: every problem here comes before anything is written.
  GptqStage(const std::filesystem::path& checkpoint, const QuantizePlan& plan, const CalibrationOptions& options,
            bool progress);
  ~GptqStage();
  // Runs every pass; the weights come from `ck` (the checkpoint being quantized).
  void run(const Checkpoint& ck, GptqResults& results);

 private:
  struct Loaded;
  std::unique_ptr<Loaded> loaded_;
  const QuantizePlan& plan_;
  bool progress_;
};

} // namespace ninfer::quantize_detail
