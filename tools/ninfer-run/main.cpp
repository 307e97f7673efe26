// ninfer-run: generate text from a model manifest (or a checkpoint folder) on the CPU
// reference plugin or a GPU plugin. Text streams to stdout; timings and memory go to stderr;
// --json prints one object instead; --interactive chats turn after turn (docs/cli.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "interactive_chat.hpp"
#include "ninfer/checkpoint/progress.hpp"
#include "ninfer/generation/generate.hpp"
#include "ninfer/manifest/manifest.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/models/model_setup.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/log.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "run_options.hpp"
#include "run_report.hpp"
#include "run_request.hpp"
#include "tool_cli.hpp"

namespace {

using namespace ninfer;
using tools::RunOptions;

constexpr const char* kTool = "ninfer-run";

ModelSource model_source(const RunOptions& o) {
  return {o.manifest, o.checkpoint, o.dtype,      o.max_context, kTool, o.no_cuda_graph, o.kv_dtype, o.memory_limit,
          o.kv_capacity, o.spec};
}

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// The context to reserve, decided before the load: the flag's or the manifest's when set; else
// a one-shot run's prompt plus --max-new and an interactive chat's kInteractiveContext, each at
// most the model's positions (the load's memory plan then refuses one that does not fit, with
// the numbers). Then checks that the prompt fits, so a prompt that cannot run is refused before
// minutes of loading.
void size_context(const RunOptions& o, ModelFiles& files, size_t prompt_tokens, int64_t max_new) {
  RuntimeOptions& rt = files.manifest.runtime;
  const int64_t positions = files.checkpoint.config().max_position_embeddings;
  const int64_t cap = positions > 0 ? positions : INT32_MAX;
  if (!rt.max_context)
    rt.max_context = o.interactive ? std::min(tools::kInteractiveContext, cap)
                                   : tools::one_shot_context(static_cast<int64_t>(prompt_tokens), max_new, cap);
  const int64_t ctx = *rt.max_context;
  if (static_cast<int64_t>(prompt_tokens) >= ctx)
    throw Error(fmt::format("the prompt has {} tokens but the context holds {}: shorten the prompt or raise "
                            "max_context (manifest runtime.max_context, --max-context)",
                            prompt_tokens, ctx));
  if (!o.interactive && static_cast<int64_t>(prompt_tokens) + std::max<int64_t>(max_new, 1) > ctx)
    throw Error(fmt::format("the prompt ({} tokens) plus {} new tokens exceed the context of {}: lower --max-new "
                            "or raise max_context",
                            prompt_tokens, max_new, ctx));
}

int run(const RunOptions& o) {
  for (const std::string& w : tools::check_run_options(o)) tools::warn(kTool, w);
  tools::apply_threads(o.threads);
  const auto t0 = std::chrono::steady_clock::now();
  ModelFiles files = open_model_files(model_source(o));
  const Manifest& m = files.manifest;
  const Tokenizer* tok = files.tok();
  if (o.interactive) {
    if (!tok) throw Error(fmt::format("--interactive needs a tokenizer and {} has none", m.checkpoint.string()));
    if (m.chat_template == ChatTemplate::None)
      throw Error(fmt::format("--interactive: the manifest sets chat_template: none ({})", m.where("chat_template")));
  }

  // The prompt and the request are checked before the (possibly long) model load.
  tools::RunContext ctx;
  ctx.model = m.name;
  if (!o.interactive) ctx.prompt_ids = tools::one_shot_prompt_ids(o, m, tok);
  GenerationRequest req = tools::make_request(o, m, files.checkpoint.config(), tok);
  size_context(o, files, ctx.prompt_ids.size(), req.max_new_tokens);

  const ModelOnDevice loaded = load_on_device(files, {o.device, o.plugin_dir, o.plugin}, 1);
  const std::unique_ptr<Backend>& backend = loaded.backend;
  CausalLM* lm = loaded.lm.get();
  ctx.device = backend->device().name;
  ctx.plugin = backend->plugin().name();
  ctx.load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.interactive) return tools::run_interactive(o, m, *tok, *lm, req, ctx);

  req.prompt_ids = ctx.prompt_ids;
  TextSink sink;
  if (!o.json)
    sink = [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
  std::optional<ProgressLine> bar;
  auto progress = [&](int64_t done, int64_t total) {
    if (total <= lm->options().prefill_chunk) return; // one chunk: nothing to watch
    if (!bar) bar.emplace("prefill", total);
    bar->update(done);
    if (done == total) bar->finish();
  };
  const GenerationResult res = generate(*lm, 0, tok, req, sink, progress);
  ctx.peak_device_bytes = backend->memory().peak;
  ctx.peak_rss_kib = peak_rss_kib();
  if (o.json) {
    std::cout << tools::result_json(ctx, res).dump() << "\n";
  } else {
    std::cout << "\n";
    std::fflush(stdout);
  }
  std::cerr << tools::summary_text(ctx, res);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  RunOptions o;
  CLI::App app{"ninfer-run: generate text with a Qwen3 / Qwen3.5 model"};
  app.footer("Examples:\n  ninfer-run models/qwen3-8b.yaml --chat --prompt \"Why is the sky blue?\"\n"
             "  ninfer-run models/qwen3-8b.yaml --interactive\n"
             "  ninfer-run --checkpoint ./Qwen3-0.6B --prompt-ids 9707,11,1879 --greedy --max-new 16 --json\n"
             "Exit codes: 0 success, 1 model / input / device problem, 2 command-line problem, 130 Ctrl-C.");
  tools::add_run_options(app, o);
  tools::add_version_flag(app, kTool);
  if (auto rc = tools::parse_command_line(app, argc, argv, kTool)) return *rc;
  init_logging(o.verbose);
  return tools::run_tool(kTool, [&] { return run(o); });
}
