#include "tool_cli.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "ninfer/models/causal_lm.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"

namespace ninfer::tools {

const char* build_version() { return NINFER_BUILD_VERSION; }

void add_version_flag(CLI::App& app, const std::string& tool) {
  app.set_version_flag("--version", tool + " " + build_version(), "Print the version and exit");
}

CLI::Option* add_threads_option(CLI::App& app, std::optional<int>& threads) {
  return app.add_option("--threads", threads,
                        "Threads of the CPU plugin (default: $NINFER_CPU_THREADS, else every hardware thread)");
}

size_t leading_number(const std::string& s, double& v) {
  size_t used = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  return used;
}

namespace {

// Whether `v` is a whole number >= 1 and nothing else.
bool is_positive_count(const std::string& v) {
  size_t end = 0;
  try {
    return std::stoll(v, &end) >= 1 && end == v.size();
  } catch (const std::exception&) {
    return false;
  }
}

} // namespace

CLI::Validator gib_amount() {
  return CLI::Validator(
      [](std::string& v) {
        double x = 0;
        if (leading_number(v, x) == v.size() && x > 0 && x <= kMaxMemoryLimitGib) return std::string();
        return "expected GiB of memory, a number > 0 and at most 1048576, got " + v;
      },
      "GIB");
}

CLI::Validator positive_count() {
  return CLI::Validator(
      [](std::string& v) { return is_positive_count(v) ? std::string() : "expected a whole number >= 1, got " + v; },
      "N");
}

void add_memory_options(CLI::App& app, std::optional<double>& memory_limit, std::optional<std::string>& kv_capacity) {
  app.add_option("--memory-limit", memory_limit,
                 "GiB of device memory the model may take, the CUDA runtime's own included (default: the device's "
                 "free memory; CPU: 80% of the available memory): emulates a smaller card (docs/memory.md)")
      ->check(gib_amount());
  app.add_option("--kv-capacity", kv_capacity,
                 "KV cache tokens, all sequences together: auto (every sequence's whole context, fitted to what "
                 "the memory leaves) or TOKENS (a block pool of that size the sequences share; docs/memory.md)")
      ->check(CLI::Validator(
          [](std::string& v) {
            if (v == "auto" || is_positive_count(v)) return std::string();
            return "expected auto or a number of tokens >= 1, got " + v;
          },
          "auto|TOKENS"));
}

void add_load_options(CLI::App& app, const LoadFlags& f) {
  app.add_option("--device", f.device, "cpu, cuda, cuda:N or auto (the best plugin that runs the model)")
      ->capture_default_str();
  app.add_option("--plugin-dir", f.plugin_dir, "Plugin directory (default: $NINFER_PLUGIN_DIR, else the install's)");
  app.add_option("--plugin", f.plugin, "Use this plugin (it must support the device)");
  add_threads_option(app, f.threads);
  app.add_option("--dtype", f.dtype, "Weights: auto, float32, bfloat16 (overrides the manifest)")
      ->check(CLI::IsMember({"auto", "float32", "bfloat16"}));
  app.add_option("--kv-dtype", f.kv_dtype,
                 "KV cache: auto (float16 on CUDA, float32 on CPU), float32, float16, bfloat16, int8, fp8, int4r "
                 "(overrides the manifest)")
      ->check(CLI::IsMember({"auto", "float32", "float16", "bfloat16", "int8", "fp8", "int4r"}));
}

void add_spec_options(CLI::App& app, SpecOverrides& spec) {
  app.add_option("--spec", spec.method,
                 "Speculative decoding: mtp (the checkpoint's MTP head drafts, the model verifies them in one pass; "
                 "the output is unchanged) or none (default: the manifest's spec.method, none; docs/speculative.md)")
      ->check(CLI::IsMember({"none", "mtp"}));
  app.add_option("--draft-tokens", spec.draft_tokens,
                 fmt::format("Drafts per speculative round, 1 to {} (default: the manifest's spec.draft_tokens, 3)",
                             kMostDraftTokens))
      ->check(CLI::Range(int64_t{1}, int64_t{kMostDraftTokens}));
  app.add_option("--draft-vocab", spec.draft_vocab,
                 "The drafter picks among token ids below N only, the most common tokens of a BPE vocabulary; "
                 "verification still reads all of them, so the output is unchanged (default: the manifest's "
                 "spec.draft_vocab; 0: the whole vocabulary)")
      ->check(CLI::Range(int64_t{0}, int64_t{INT32_MAX}));
  app.add_option("--draft-head", spec.draft_head,
                 "The drafter's LM head: lm_head (the model's rows) or int4 (those rows quantized to int4 at load, a "
                 "quarter of a 16-bit head's bytes per draft pass; the output is unchanged) (default: the manifest's "
                 "spec.draft_head, lm_head)")
      ->check(CLI::IsMember({"lm_head", "int4"}));
}

void check_spec_options(const SpecOverrides& spec) {
  if (spec.method != "none") return;
  if (spec.draft_tokens) throw UsageError("--draft-tokens needs --spec mtp, not --spec none");
  if (spec.draft_vocab) throw UsageError("--draft-vocab needs --spec mtp, not --spec none");
  if (spec.draft_head) throw UsageError("--draft-head needs --spec mtp, not --spec none");
  if (spec.max_batch) throw UsageError("--spec-max-batch needs --spec mtp, not --spec none");
}

void apply_threads(const std::optional<int>& threads) {
  if (!threads) return;
  if (*threads < 1 || *threads > 256) throw UsageError(fmt::format("--threads {}: expected 1 to 256", *threads));
  ::setenv("NINFER_CPU_THREADS", std::to_string(*threads).c_str(), 1);
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const std::string& tool) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) { // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fflush(stdout);
    std::string message = e.what();
    if (message.rfind(tool + ": ", 0) == 0) message.erase(0, tool.size() + 2); // CLI11 may name the app itself
    fmt::print(stderr, "{}: error: {}\nRun with --help for the options.\n", tool, message);
    return kExitUsage;
  }
  return std::nullopt;
}

int run_tool(const std::string& tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "{}: error: {}\n", tool, e.what());
    return kExitUsage;
  } catch (const Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "{}: error: {}\n", tool, e.what());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "{}: internal error: {}\n", tool, e.what());
  }
  return kExitFailure;
}

std::string no_such_plugin(const std::string& name, const std::filesystem::path& dir, const PluginHost& plugins) {
  std::vector<std::string> names;
  for (const auto& p : plugins.plugins()) names.push_back(p->name());
  return fmt::format("--plugin {}: no plugin of that name in {} (available: {})", name, dir.string(),
                     names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
}

void warn(const std::string& tool, const std::string& message) {
  fmt::print(stderr, "{}: warning: {}\n", tool, message);
}

} // namespace ninfer::tools
