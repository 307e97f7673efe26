#include "run_options.hpp"

namespace ninfer::tools {

void add_run_options(CLI::App& app, RunOptions& o) {
  app.add_option("manifest", o.manifest, "Model manifest (YAML, see docs/manifest.md)");
  app.add_option("--checkpoint", o.checkpoint, "Hugging Face checkpoint folder (instead of a manifest)");
  auto* prompt = app.add_option("--prompt", o.prompt, "Prompt text");
  app.add_option("--prompt-ids", o.prompt_ids, "Prompt as token ids: 1,2,3")->delimiter(',')->excludes(prompt);
  app.add_flag("--chat", o.chat, "Wrap --prompt as a user turn in the Qwen chat format");
  app.add_option("--system", o.system, "System message for --chat");
  app.add_flag("--no-think", o.no_think, "With --chat: Qwen's thinking switch off (empty <think> block)");
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
  app.add_flag("--ignore-eos", o.ignore_eos, "Do not stop at the model's end-of-sequence tokens");
  app.add_option("--device", o.device, "cpu, cuda, cuda:N or auto (the best plugin that runs the model)")
      ->capture_default_str();
  app.add_option("--plugin-dir", o.plugin_dir, "Plugin directory (default: $NINFER_PLUGIN_DIR, else the install's)");
  app.add_option("--plugin", o.plugin, "Use this plugin (it must support the device)");
  app.add_option("--dtype", o.dtype, "Weights: auto, float32, bfloat16 (overrides the manifest)");
  app.add_option("--kv-dtype", o.kv_dtype,
                 "KV cache: auto (float16 on CUDA, float32 on CPU), float32, float16, bfloat16 (overrides the manifest)");
  app.add_option("--max-context", o.max_context, "Tokens one sequence may hold (overrides the manifest)");
  app.add_flag("--no-cuda-graph", o.no_cuda_graph, "Diagnostic: launch decode kernels one by one (no CUDA graphs)");
  app.add_flag("--json", o.json, "Print one JSON object instead of streaming text");
  app.add_option("--logprobs", o.logprobs, "With --json: K most likely [id, logprob] pairs per generated token");
  app.add_flag("--echo", o.echo, "With --json --logprobs: also the K most likely next tokens at each prompt position");
  app.add_flag("-v,--verbose", o.verbose, "Debug logging on stderr");
}

} // namespace ninfer::tools
