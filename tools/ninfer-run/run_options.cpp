#include "run_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>

#include "ninfer/abi/ops/sample_math.h"
#include "ninfer/devices/device.hpp"
#include "ninfer/sampling/sampling_params.hpp"
#include "tool_cli.hpp"

namespace ninfer::tools {

namespace {

// "1,2,3": ids are whole numbers in [0, 2^31), none empty; anything else is a command-line
// problem naming the piece (an id past the model's vocabulary is the model's, found at load).
std::vector<int64_t> parse_token_ids(const std::string& text) {
  std::vector<int64_t> ids;
  size_t at = 0;
  for (;;) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string piece = text.substr(at, comma - at);
    size_t used = 0;
    long long v = -1;
    try {
      if (!piece.empty() && std::isdigit(static_cast<unsigned char>(piece.front()))) v = std::stoll(piece, &used);
    } catch (const std::exception&) {
    }
    if (used != piece.size() || v < 0 || v > INT32_MAX)
      throw CLI::ValidationError("--prompt-ids", fmt::format("'{}' in '{}' is not a token id (expected whole numbers "
                                                             "from 0, separated by commas: 1,2,3)",
                                                             piece, text));
    ids.push_back(v);
    if (comma == text.size()) return ids;
    at = comma + 1;
  }
}

// "ID=BIAS": a token id (whole number from 0) and a bias (a number; its range is the sampler's).
std::pair<int64_t, double> parse_logit_bias(const std::string& text) {
  const size_t eq = text.find('=');
  const std::string id_text = text.substr(0, eq), bias_text = eq == std::string::npos ? "" : text.substr(eq + 1);
  const auto bad = [&] {
    return CLI::ValidationError("--logit-bias", fmt::format("'{}': expected ID=BIAS, a token id and a number in "
                                                            "[-100, 100] (5=-100 bans token 5)",
                                                            text));
  };
  const bool digits = !id_text.empty() && id_text.size() <= 10 &&
                      std::all_of(id_text.begin(), id_text.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  if (!digits || std::stoll(id_text) > INT32_MAX || bias_text.empty()) throw bad();
  size_t used = 0;
  double bias = 0;
  try {
    bias = std::stod(bias_text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  if (used != bias_text.size()) throw bad();
  return {std::stoll(id_text), bias};
}

} // namespace

void add_run_options(CLI::App& app, RunOptions& o) {
  app.add_option("manifest", o.manifest, "Model manifest (YAML, see docs/manifest.md)");
  app.add_option("--checkpoint", o.checkpoint, "Hugging Face checkpoint folder (instead of a manifest)");
  auto* prompt = app.add_option("--prompt", o.prompt, "Prompt text");
  auto* file = app.add_option("--prompt-file", o.prompt_file, "Read the prompt text from a file (- : standard input)");
  auto* ids = app.add_option_function<std::string>(
      "--prompt-ids", [&o](const std::string& text) { o.prompt_ids = parse_token_ids(text); },
      "Prompt as token ids: 1,2,3");
  prompt->excludes(file)->excludes(ids);
  file->excludes(ids);
  app.add_flag("-i,--interactive", o.interactive,
               "Chat turn after turn on the terminal (history kept; /reset, /exit; Ctrl-C stops an answer)");
  app.add_flag("--chat", o.chat, "Wrap the prompt as a user turn in the Qwen chat format");
  app.add_option("--system", o.system, "System message for --chat / --interactive");
  app.add_flag("--no-think", o.no_think, "With --chat / --interactive: Qwen's thinking off (empty <think> block)");
  app.add_option("--max-new", o.max_new, "Most tokens to generate (default: the manifest's, 512)");
  app.add_flag("--greedy", o.greedy, "Always take the most likely token (temperature 0)");
  app.add_option("--temperature", o.temperature, "Sampling temperature (0 = greedy)");
  app.add_option("--top-k", o.top_k, "Keep the K most likely tokens (0 = off)");
  app.add_option("--top-p", o.top_p, "Nucleus sampling: smallest set with this much probability");
  app.add_option("--min-p", o.min_p, "Drop tokens below min-p x the top probability");
  app.add_option("--repetition-penalty", o.repetition_penalty, "HF repetition penalty, in [0.01, 100] (1 = off)");
  app.add_option("--presence-penalty", o.presence_penalty, "OpenAI presence penalty");
  app.add_option("--frequency-penalty", o.frequency_penalty, "OpenAI frequency penalty");
  app.add_option("--seed", o.seed, "Seed for reproducible sampling");
  app.add_option("--stop", o.stop, "Stop string (repeatable; not included in the output)");
  app.add_option("--stop-id", o.stop_ids, "Stop token id (repeatable)");
  app.add_option_function<std::vector<std::string>>(
      "--logit-bias",
      [&o](const std::vector<std::string>& items) {
        for (const std::string& item : items) o.logit_bias.push_back(parse_logit_bias(item));
      },
      "ID=BIAS: add BIAS (-100 to 100) to token ID's logit before sampling; -100 bans it (repeatable)");
  app.add_flag("--ignore-eos", o.ignore_eos, "Do not stop at the model's end-of-sequence tokens");
  add_load_options(app, {o.device, o.plugin_dir, o.plugin, o.threads, o.dtype, o.kv_dtype});
  app.add_option("--max-context", o.max_context,
                 "Tokens one sequence may hold (default: the manifest's; unset there, one-shot runs take the prompt "
                 "plus --max-new)");
  add_memory_options(app, o.memory_limit, o.kv_capacity);
  add_spec_options(app, o.spec);
  app.add_flag("--no-cuda-graph", o.no_cuda_graph, "Diagnostic: launch decode kernels one by one (no CUDA graphs)");
  app.add_flag("--json", o.json, "Print one JSON object (per turn with --interactive) instead of streaming text");
  app.add_option("--logprobs", o.logprobs, "With --json: K most likely [id, logprob] pairs per generated token");
  app.add_flag("--echo", o.echo, "With --json --logprobs: also the K most likely next tokens at each prompt position");
  app.add_flag("-v,--verbose", o.verbose, "Debug logging on stderr");
}

std::vector<std::string> check_run_options(const RunOptions& o) {
  std::vector<std::string> warnings;
  if (o.manifest.empty() && o.checkpoint.empty())
    throw UsageError("no model: give a MANIFEST file or --checkpoint DIR (see ninfer-run --help)");
  if (!o.manifest.empty() && !o.checkpoint.empty())
    throw UsageError("give either a MANIFEST or --checkpoint DIR, not both");
  try {
    parse_device_spec(o.device);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  const bool text_prompt = o.prompt || o.prompt_file;
  if (o.interactive) {
    if (!o.prompt_ids.empty()) throw UsageError("--interactive takes text turns, not --prompt-ids");
    if (o.prompt_file && *o.prompt_file == "-")
      throw UsageError("--interactive reads its turns from standard input: --prompt-file - cannot read it too");
    if (o.echo) throw UsageError("--echo is for one prompt: it does not go with --interactive");
    if (o.chat) warnings.push_back("--chat has no effect with --interactive (every turn is a chat turn)");
  } else {
    if (!text_prompt && o.prompt_ids.empty())
      throw UsageError("no prompt: give --prompt TEXT, --prompt-file FILE, --prompt-ids 1,2,3 or --interactive");
    if (o.chat && !o.prompt_ids.empty()) throw UsageError("--chat needs --prompt text, not --prompt-ids");
  }
  if (o.logprobs && *o.logprobs < 0) throw UsageError(fmt::format("--logprobs must be >= 0 (got {})", *o.logprobs));
  const int64_t logprobs = o.logprobs.value_or(0);
  if ((logprobs > 0 || o.echo) && !o.json) throw UsageError("--logprobs and --echo need --json");
  if (o.echo && logprobs == 0) throw UsageError("--echo needs --logprobs K (K >= 1)");
  if (o.max_new && *o.max_new < 0) throw UsageError(fmt::format("--max-new must be >= 0 (got {})", *o.max_new));
  if (o.max_context && *o.max_context < 2)
    throw UsageError(fmt::format("--max-context must be at least 2 (got {})", *o.max_context));
  for (int64_t id : o.stop_ids)
    if (id < 0 || id > INT32_MAX) throw UsageError(fmt::format("--stop-id {}: expected a token id (0 or more)", id));
  for (size_t i = 0; i < o.logit_bias.size(); ++i) {
    const double bias = o.logit_bias[i].second;
    if (!(std::isfinite(bias) && std::fabs(bias) <= kMaxLogitBias))
      throw UsageError(fmt::format("--logit-bias {}={}: a bias must be in [-100, 100]", o.logit_bias[i].first, bias));
    for (size_t j = 0; j < i; ++j)
      if (o.logit_bias[i].first == o.logit_bias[j].first)
        throw UsageError(fmt::format("--logit-bias: token {} is given twice", o.logit_bias[i].first));
  }
  if (o.greedy && o.temperature && *o.temperature != 0)
    throw UsageError("--greedy and --temperature contradict each other: give one of them");
  if (o.threads && (*o.threads < 1 || *o.threads > 256))
    throw UsageError(fmt::format("--threads {}: expected 1 to 256", *o.threads));
  check_spec_options(o.spec);

  if (!o.chat_format()) {
    if (o.system) warnings.push_back("--system has no effect without --chat or --interactive");
    if (o.no_think) warnings.push_back("--no-think has no effect without --chat or --interactive");
  }
  const bool greedy = o.greedy || (o.temperature && ninfer_sample_greedy(*o.temperature));
  if (o.spec.method == "mtp" &&
      (o.repetition_penalty || o.presence_penalty || o.frequency_penalty || o.logprobs || !o.logit_bias.empty()))
    warnings.push_back("--spec mtp: a request with penalties, --logit-bias or --logprobs is sampled on the host, one "
                       "token per step: it does not speculate");
  if (greedy) {
    if (o.top_k || o.top_p || o.min_p) warnings.push_back("--top-k, --top-p and --min-p have no effect with greedy decoding");
    if (o.seed) warnings.push_back("--seed has no effect with greedy decoding (nothing is drawn)");
  }
  if (o.device == "cpu") {
    if (o.no_cuda_graph) warnings.push_back("--no-cuda-graph has no effect with --device cpu");
  } else if (o.device.rfind("cuda", 0) == 0 && o.threads) {
    warnings.push_back("--threads has no effect with --device " + o.device + " (it sets the CPU plugin's threads)");
  }
  return warnings;
}

} // namespace ninfer::tools
