// ninfer-run's command line: what the user asked for, before any file is read.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ninfer/models/model_setup.hpp"

namespace ninfer::tools {

struct RunOptions {
  std::string manifest;             // positional MANIFEST
  std::string checkpoint;           // --checkpoint DIR (implicit manifest)
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_file; // "-": standard input
  std::vector<int64_t> prompt_ids;
  bool interactive = false;
  bool chat = false;
  std::optional<std::string> system;
  bool no_think = false;
  std::optional<int64_t> max_new;
  bool greedy = false;
  std::optional<double> temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  std::optional<int64_t> top_k;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int64_t> stop_ids;
  std::vector<std::pair<int64_t, double>> logit_bias; // --logit-bias ID=BIAS
  bool ignore_eos = false;
  std::string device = "auto";
  std::string plugin_dir;
  std::string plugin;
  std::optional<int> threads;
  std::optional<std::string> dtype;
  std::optional<std::string> kv_dtype;
  std::optional<int64_t> max_context;
  std::optional<double> memory_limit;     // --memory-limit GIB
  std::optional<std::string> kv_capacity; // --kv-capacity auto|TOKENS
  SpecOverrides spec; // --spec none|mtp, --draft-tokens K, --draft-vocab N
  bool json = false;
  bool no_cuda_graph = false;
  std::optional<int64_t> logprobs;
  bool echo = false;
  bool verbose = false;

  bool chat_format() const { return chat || interactive; } // prompts go through the chat template
};

// Declares every flag on `app`, bound to `o`.
void add_run_options(CLI::App& app, RunOptions& o);

// Checks the flags against each other before anything is read or loaded: throws UsageError for
// a combination that cannot work, and returns a warning for each flag that has no effect as given.
std::vector<std::string> check_run_options(const RunOptions& o);

} // namespace ninfer::tools
