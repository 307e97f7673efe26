// ninfer-make-checkpoint: writes a random-weight checkpoint folder for a named preset, with
// the real Qwen3 tokenizer copied in, so ninfer runs end to end with nothing downloaded.
// The weights are random and the tool says so.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tool_cli.hpp"

#include <iostream>

#include "ninfer/checkpoint/random_checkpoint.hpp"
#include "ninfer/checkpoint/shape_presets.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/log.hpp"

namespace {

using namespace ninfer;

// Every shape preset of ninfer-bench, so the shapes it measures can also be served or run from
// a real safetensors file (the full-size ones are large: qwen3-8b in bf16 is 16.4 GB).
std::string preset_help() {
  std::string s = "preset to write:";
  for (const auto& p : shape_presets()) s += fmt::format("\n  {}: {}", p.name, p.description);
  return s;
}

int run(int argc, char** argv) {
  CLI::App app{"Write a checkpoint folder with RANDOM weights for a named model preset (config.json, "
               "model.safetensors, generation_config.json, tokenizer files). Its output text is meaningless; "
               "it exists to run and test ninfer without downloading a model."};
  RandomCheckpointOptions opt;
  std::string dtype = "f32";
  bool list = false, verbose = false;
  app.add_option("--preset", opt.preset, preset_help());
  app.add_option("--out", opt.out, "checkpoint folder to create");
  app.add_option("--tokenizer", opt.tokenizer,
                 "tokenizer.json to copy in (tokenizer_config.json is taken from the same folder)");
  app.add_option("--seed", opt.seed, "random seed (same seed, same weights)")->default_val(0);
  app.add_option("--dtype", dtype, "weight dtype")->check(CLI::IsMember({"f32", "bf16"}))->default_val("f32");
  app.add_flag("--force", opt.force, "replace --out if it is an earlier random checkpoint");
  app.add_flag("--list-presets", list, "list the presets and exit");
  app.add_flag("-v,--verbose", verbose, "debug logging");
  ninfer::tools::add_version_flag(app, "ninfer-make-checkpoint");
  if (auto rc = ninfer::tools::parse_command_line(app, argc, argv, "ninfer-make-checkpoint")) return *rc;
  init_logging(verbose);

  if (list) {
    for (const auto& p : shape_presets()) fmt::print("{:<20} {}\n", p.name, p.description);
    return 0;
  }
  if (opt.preset.empty() || opt.out.empty() || opt.tokenizer.empty())
    throw ninfer::tools::UsageError("--preset, --out and --tokenizer are required (see --help; --list-presets lists "
                                    "presets)");
  opt.dtype = dtype == "bf16" ? DType::BF16 : DType::F32;
  opt.config = shape_preset_config(opt.preset); // throws, listing the presets, for an unknown name

  const RandomCheckpointSummary s = write_random_checkpoint(opt);
  const ModelConfig& c = s.config;
  fmt::print("Wrote {} ({} preset '{}', seed {}, {}): {:.1f}M parameters, {:.1f} MB of weights.\n",
             s.dir.string(), family_name(c.family), opt.preset, opt.seed, dtype, s.parameters / 1e6,
             s.weight_bytes / 1e6);
  fmt::print("NOTE: the weights are RANDOM. This checkpoint has the shapes of a real {} model and the real Qwen3\n"
             "tokenizer, but it has learned nothing: the text it generates is meaningless.\n",
             family_name(c.family));
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return ninfer::tools::run_tool("ninfer-make-checkpoint", [&] { return run(argc, argv); });
}
