// ninfer-run: generate text from a model manifest (or a checkpoint folder) on the CPU
// reference plugin or a GPU plugin. Text streams to stdout; timings and memory go to stderr;
// --json prints one object instead (docs/cli.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "ninfer/support/error.hpp"
#include "ninfer/generation/generate.hpp"
#include "ninfer/support/log.hpp"
#include "ninfer/manifest/manifest.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/models/model_setup.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/tokenizer/chat_format.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "run_options.hpp"
#include "run_report.hpp"

namespace {

using namespace ninfer;
using tools::RunOptions;

ModelSource model_source(const RunOptions& o) {
  return {o.manifest, o.checkpoint, o.dtype, o.max_context, "ninfer-run", o.no_cuda_graph, o.kv_dtype};
}

std::vector<int32_t> prompt_ids(const RunOptions& o, const Manifest& m, const Tokenizer* tok) {
  if (!o.prompt_ids.empty()) {
    if (o.chat) throw Error("--chat needs --prompt text, not --prompt-ids");
    std::vector<int32_t> ids;
    for (int64_t id : o.prompt_ids) {
      if (id < 0 || id > INT32_MAX) throw Error(fmt::format("--prompt-ids: {} is not a token id", id));
      ids.push_back(static_cast<int32_t>(id));
    }
    return ids;
  }
  if (!o.prompt_given) throw Error("no prompt: give --prompt TEXT or --prompt-ids 1,2,3");
  if (!tok)
    throw Error(fmt::format("--prompt needs a tokenizer and {} has none: set `tokenizer:` in the manifest or "
                            "use --prompt-ids", m.checkpoint.string()));
  std::string text = o.prompt;
  if (o.chat) {
    if (m.chat_template == ChatTemplate::None)
      throw Error(fmt::format("--chat: the manifest sets chat_template: none ({})", m.where("chat_template")));
    std::vector<ChatMessage> msgs;
    if (!o.system.empty()) msgs.push_back({"system", o.system, std::nullopt});
    msgs.push_back({"user", o.prompt, std::nullopt});
    text = format_chat(msgs, ChatOptions{true, !o.no_think});
  }
  std::vector<int32_t> ids = tok->encode(text);
  if (ids.empty()) throw Error("the prompt is empty: it encodes to no tokens");
  return ids;
}

GenerationRequest make_request(const RunOptions& o, const Manifest& m, const CausalLM& lm, const Tokenizer* tok,
                               std::vector<int32_t> ids) {
  GenerationRequest r;
  r.prompt_ids = std::move(ids);
  r.sampling = m.sampling;
  if (o.greedy) r.sampling.temperature = 0;
  if (o.temperature) r.sampling.temperature = *o.temperature;
  if (o.top_k) r.sampling.top_k = *o.top_k;
  if (o.top_p) r.sampling.top_p = *o.top_p;
  if (o.min_p) r.sampling.min_p = *o.min_p;
  if (o.repetition_penalty) r.sampling.repetition_penalty = *o.repetition_penalty;
  if (o.presence_penalty) r.sampling.presence_penalty = *o.presence_penalty;
  if (o.frequency_penalty) r.sampling.frequency_penalty = *o.frequency_penalty;
  if (o.seed) r.sampling.seed = *o.seed;
  if (o.logprobs < 0) throw Error("--logprobs must be >= 0");
  if ((o.logprobs > 0 || o.echo) && !o.json) throw Error("--logprobs and --echo need --json");
  if (o.echo && o.logprobs == 0) throw Error("--echo needs --logprobs K");
  r.sampling.top_logprobs = o.logprobs;
  r.sampling.validate();
  r.prompt_logprobs = o.echo ? o.logprobs : 0;
  r.max_new_tokens = o.max_new.value_or(m.max_new_tokens);
  r.stop.strings = o.stop;
  for (int64_t id : o.stop_ids) r.stop.token_ids.insert(static_cast<int32_t>(id));
  if (!o.ignore_eos) {
    for (int64_t id : lm.config().eos_token_ids) r.stop.token_ids.insert(static_cast<int32_t>(id));
    // A chat turn ends at <|im_end|> even when config.json names another EOS (base models).
    if (tok && o.chat)
      if (auto id = tok->token_id("<|im_end|>")) r.stop.token_ids.insert(*id);
  }
  return r;
}

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

int run(const RunOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  ModelFiles files = open_model_files(model_source(o));
  const Manifest& m = files.manifest;
  const Tokenizer* tok = files.tok();

  // The prompt is checked before the (possibly long) model load.
  tools::RunContext ctx;
  ctx.model = m.name;
  ctx.prompt_ids = prompt_ids(o, m, tok);

  const ModelOnDevice loaded = load_on_device(files, {o.device, o.plugin_dir, o.plugin}, 1);
  const std::unique_ptr<Backend>& backend = loaded.backend;
  CausalLM* lm = loaded.lm.get();
  ctx.device = backend->device().name;
  ctx.plugin = backend->plugin().name();
  ctx.load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const GenerationRequest req = make_request(o, m, *lm, tok, ctx.prompt_ids);

  TextSink sink;
  if (!o.json)
    sink = [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
  const GenerationResult res = generate(*lm, 0, tok, req, sink);
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
             "  ninfer-run --checkpoint ./Qwen3-0.6B --prompt-ids 9707,11,1879 --greedy --max-new 16 --json");
  tools::add_run_options(app, o);
  CLI11_PARSE(app, argc, argv);
  o.prompt_given = app.count("--prompt") > 0;
  init_logging(o.verbose);
  try {
    return run(o);
  } catch (const Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "ninfer-run: error: {}\n", e.what());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "ninfer-run: internal error: {}\n", e.what());
  }
  return 1;
}
