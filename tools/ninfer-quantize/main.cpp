// ninfer-quantize: writes a quantized copy of a bf16 / fp16 / fp32 Hugging Face checkpoint in
// a standard layout (compressed-tensors pack-quantized, or GPTQ) that ninfer, vLLM, SGLang and
// transformers load. Round to nearest per group, or GPTQ from the Hessians of activations the
// runtime computes on calibration text; a recipe says which modules and how
// (docs/ninfer-quantize.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <optional>

#include "ninfer/quantize/quantize_checkpoint.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/log.hpp"
#include "ninfer/support/paths.hpp"
#include "tool_cli.hpp"

namespace {

using namespace ninfer;

// "4GB", "500MB", "1.5GB", "123456" (bytes); decimal units as Hugging Face's max_shard_size.
uint64_t parse_size(const std::string& s, const char* flag) {
  double v = 0;
  const size_t used = tools::leading_number(s, v);
  std::string unit = s.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const double mult = unit.empty() || unit == "B" ? 1 : unit == "KB" ? 1e3 : unit == "MB" ? 1e6 : unit == "GB" ? 1e9 : 0;
  if (used == 0 || mult == 0 || !(v * mult >= 1e3) || v * mult > 1e13)
    throw tools::UsageError(fmt::format("{} '{}': give a size from 1KB to 10000GB, such as 4GB or 500MB", flag, s));
  return static_cast<uint64_t>(v * mult);
}

int run(int argc, char** argv) {
  CLI::App app{"ninfer-quantize: write a quantized copy of a bf16 / fp16 / fp32 Qwen3 or Qwen3.5 checkpoint in the "
               "compressed-tensors (pack-quantized) or GPTQ layout: round to nearest per group, or GPTQ (error "
               "compensation from the Hessians of the activations the model computes on --calibration text). Linear weights of "
               "the decoder layers become int4 or int8; embeddings, norms, lm_head, Gated DeltaNet in_proj_a / "
               "in_proj_b, conv1d, A_log, dt_bias, the vision tower and MTP weights are copied unchanged unless the "
               "recipe says otherwise. The output appears whole or not at all."};
  app.footer("Examples:\n  ninfer-quantize --checkpoint checkpoints/Qwen3.5-27B --out checkpoints/Qwen3.5-27B-int4\n"
             "  ninfer-quantize --checkpoint ./Qwen3-8B --out ./Qwen3-8B-gptq --format gptq --bits 4 --group-size 128\n"
             "  ninfer-quantize --checkpoint checkpoints/Qwen3.5-27B --out checkpoints/Qwen3.5-27B-mixed --recipe models/recipes/qwen3_5-int4-mixed.yaml\n"
             "  ninfer-quantize --checkpoint checkpoints/Qwen3-8B --out checkpoints/Qwen3-8B-gptq --recipe models/recipes/int4-g128-gptq.yaml --calibration calib.txt --device cuda\n"
             "Exit status: 0 written; 1 any problem with the input, recipe or output (one line naming it); 2 a bad "
             "command line.");
  QuantizeOptions opt;
  std::string recipe_file, format, method, max_shard = "4GB", hessian_memory = "16GB";
  std::optional<int> bits;
  std::optional<int64_t> group_size;
  bool verbose = false, quiet = false;
  app.add_option("--checkpoint", opt.checkpoint, "input checkpoint folder (bf16 / fp16 / fp32 safetensors); required");
  app.add_option("--out", opt.out, "output folder to create (refused if it exists, unless --force); required");
  app.add_option("--recipe", recipe_file, "recipe YAML (schemas/quantize_recipe.schema.json); default: int4, group "
                                          "128, compressed-tensors, lm_head and in_proj_a/b kept");
  app.add_option("--format", format, "layout written, over the recipe's: compressed-tensors or gptq");
  app.add_option("--method", method, "method, over the recipe's: rtn (round to nearest) or gptq (needs --calibration)");
  app.add_option("--bits", bits, "bits of the quantized modules, over the recipe's default: 4 or 8");
  app.add_option("--group-size", group_size,
                 "input channels per scale, over the recipe's default; -1: one scale per output channel");
  app.add_option("--max-shard-size", max_shard, "most tensor data per output file (decimal: 4GB, 500MB)")
      ->capture_default_str();
  app.add_flag("--force", opt.force, "replace --out if it is a checkpoint folder");
  CalibrationOptions& cal = opt.calibration;
  app.add_option("--calibration", cal.file,
                 "gptq: UTF-8 text the float model reads (with the checkpoint's tokenizer) to measure the inputs of "
                 "its projections");
  app.add_option("--calibration-tokens", cal.tokens, "gptq: tokens per calibration sample (one sequence each)")
      ->capture_default_str();
  app.add_option("--calibration-samples", cal.samples,
                 "gptq: most samples taken from the text (fewer when it is shorter)")
      ->capture_default_str();
  app.add_option("--device", cal.device, "gptq: where the float model runs on the calibration text: cpu, cuda, "
                                         "cuda:N or auto")
      ->capture_default_str();
  app.add_option("--plugin-dir", cal.plugin_dir, "gptq: plugin directory (default: $NINFER_PLUGIN_DIR, else the "
                                                 "install's)");
  app.add_option("--hessian-memory", hessian_memory,
                 "gptq: most host memory for Hessians at once (decimal: 16GB); layers beyond it take further passes "
                 "over the calibration text")
      ->capture_default_str();
  app.add_option("--calibration-layers-per-pass", cal.layers_per_pass,
                 "gptq: decoder layers whose Hessians one pass collects (0: as many as --hessian-memory holds)")
      ->capture_default_str();
  app.add_flag("-q,--quiet", quiet, "no progress lines (and no info log lines)");
  app.add_flag("-v,--verbose", verbose, "debug logging");
  tools::add_version_flag(app, "ninfer-quantize");
  if (auto rc = tools::parse_command_line(app, argc, argv, "ninfer-quantize")) return *rc;
  return tools::run_tool("ninfer-quantize", [&] {
    // Checked here rather than by the parser, so an unknown flag is named first, as by every tool.
    for (const char* flag : {"--checkpoint", "--out"})
      if (app.count(flag) == 0) throw tools::UsageError(fmt::format("{} is required", flag));
    init_logging(verbose);
    if (quiet && !verbose) spdlog::set_level(spdlog::level::warn); // GPTQ's model load logs at info

    opt.progress = !quiet;
    opt.max_shard_bytes = parse_size(max_shard, "--max-shard-size");
    cal.hessian_memory = parse_size(hessian_memory, "--hessian-memory");
    if (!recipe_file.empty()) opt.recipe = load_recipe(recipe_file, data_dir() / "schemas" / "quantize_recipe.schema.json");
    RecipeOverrides over;
    if (!format.empty()) over.format = quant_format_from_name(format);
    if (!method.empty()) over.method = quantize_method_from_name(method);
    over.bits = bits;
    over.group_size = group_size;
    apply_overrides(opt.recipe, over);

    const QuantizeSummary s = quantize_checkpoint(opt);
    fmt::print("Wrote {}: {} tensors, {} linear weights quantized ({}, {}), {} copied; {:.2f} GB -> {:.2f} GB in {} "
               "file(s), {:.1f} s.\n",
               s.out.string(), s.tensors_in, s.modules_quantized, quant_format_name(opt.recipe.format),
               quant_method_name(opt.recipe.method), s.tensors_copied, s.bytes_in / 1e9, s.bytes_out / 1e9, s.shards,
               s.seconds);
    return 0;
  });
}

} // namespace

int main(int argc, char** argv) { return run(argc, argv); }
