#include "calibration_text.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "ninfer/support/bounded_file.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::quantize_detail {

void require_calibration_file(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    throw Error(fmt::format("--calibration {}: no such file (a UTF-8 text the model reads to measure its "
                            "activations)",
                            file.string()));
  try {
    require_regular_file(file);
  } catch (const Error& e) {
    throw Error(fmt::format("--calibration {}", e.what()));
  }
}

CalibrationSamples calibration_samples(const std::filesystem::path& file, const Tokenizer& tokenizer, int64_t tokens,
                                       int64_t max_samples) {
  require_calibration_file(file);
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw Error(fmt::format("--calibration {}: cannot be read", file.string()));
  std::vector<int32_t> ids;
  try {
    ids = tokenizer.encode(text.str());
  } catch (const Error& e) {
    throw Error(fmt::format("--calibration {}: {}", file.string(), e.what()));
  }
  CalibrationSamples out;
  out.file_tokens = static_cast<int64_t>(ids.size());
  const int64_t whole = out.file_tokens / tokens;
  if (whole == 0)
    throw Error(fmt::format("--calibration {}: {} tokens (tokenizer {}), fewer than one sample of --calibration-tokens "
                            "{}; give a longer text or fewer tokens per sample",
                            file.string(), out.file_tokens, tokenizer.source(), tokens));
  for (int64_t s = 0; s < std::min(whole, max_samples); ++s)
    out.samples.emplace_back(ids.begin() + s * tokens, ids.begin() + (s + 1) * tokens);
  return out;
}

} // namespace ninfer::quantize_detail
