// From ninfer-run's flags and the manifest to what generation needs: the prompt's ids, the
// sampling request, and the context a one-shot run reserves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ninfer/checkpoint/model_config.hpp"
#include "ninfer/generation/generate.hpp"
#include "ninfer/manifest/manifest.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "run_options.hpp"

namespace ninfer::tools {

// The prompt text of --prompt or --prompt-file (the file's bytes as they are; "-" reads
// standard input to its end). Throws ninfer::Error for a file that cannot be read.
std::string prompt_text(const RunOptions& o);

// The ids of a one-shot run's prompt: --prompt-ids as given, else the text (wrapped as a chat
// turn with --chat) encoded. Throws ninfer::Error for a prompt the model cannot take.
std::vector<int32_t> one_shot_prompt_ids(const RunOptions& o, const Manifest& m, const Tokenizer* tok);

// The context a one-shot run reserves when neither --max-context nor the manifest sets one: the
// prompt plus --max-new, rounded up to a multiple of 256, at most `cap` (the model's default).
// The KV cache is sized by it, so a short prompt does not reserve gigabytes for 32K tokens.
int64_t one_shot_context(int64_t prompt_tokens, int64_t max_new, int64_t cap);
inline constexpr int64_t kContextGranule = 256;
// The context --interactive reserves when neither --max-context nor the manifest sets one.
inline constexpr int64_t kInteractiveContext = 4096;

// The generation request of the flags over the manifest's defaults (no prompt ids yet). Throws
// UsageError for a sampling flag out of range.
GenerationRequest make_request(const RunOptions& o, const Manifest& m, const ModelConfig& cfg, const Tokenizer* tok);

} // namespace ninfer::tools
