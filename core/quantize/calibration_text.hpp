// The calibration set of GPTQ: a text file read through the checkpoint's own tokenizer and cut
// into samples of consecutive tokens, each fed to the model as one sequence.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "ninfer/tokenizer/tokenizer.hpp"

namespace ninfer::quantize_detail {

struct CalibrationSamples {
  std::vector<std::vector<int32_t>> samples; // each `tokens` long
  int64_t file_tokens = 0;                   // tokens the whole file holds
};

// Throws ninfer::Error naming `--calibration FILE` when the file is missing or not a regular file
// (a folder, a FIFO), before anything is read.
void require_calibration_file(const std::filesystem::path& file);

// The first `max_samples` whole samples of `tokens` tokens of `file` (fewer when the file holds
// fewer). Throws ninfer::Error naming the file: missing or unreadable, not UTF-8, or shorter
// than one sample.
CalibrationSamples calibration_samples(const std::filesystem::path& file, const Tokenizer& tokenizer, int64_t tokens,
                                       int64_t max_samples);

} // namespace ninfer::quantize_detail
