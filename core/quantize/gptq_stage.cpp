#include "gptq_stage.hpp"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "calibration_text.hpp"
#include "hessian_collector.hpp"
#include "ninfer/quantize/hessian_inputs.hpp"
#include "module_tensors.hpp"
#include "ninfer/models/linear_observer.hpp"
#include "ninfer/models/model_setup.hpp"
#include "ninfer/quantize/gptq.hpp"
#include "ninfer/support/error.hpp"
#include "quantize_progress.hpp"

namespace ninfer::quantize_detail {

namespace fs = std::filesystem;

GptqResults::GptqResults(fs::path dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }

GptqResults::~GptqResults() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

fs::path GptqResults::file(const std::string& module) const { return dir_ / (module + ".parts"); }

// A part count, then each part's size and bytes (little-endian host).
void GptqResults::write(const std::string& module, const std::vector<std::string>& parts) {
  std::ofstream out(file(module), std::ios::binary | std::ios::trunc);
  const uint64_t count = parts.size();
  out.write(reinterpret_cast<const char*>(&count), sizeof count);
  for (const auto& p : parts) {
    const uint64_t n = p.size();
    out.write(reinterpret_cast<const char*>(&n), sizeof n);
    out.write(p.data(), static_cast<std::streamsize>(n));
  }
  if (!out.flush()) throw Error(fmt::format("{}: cannot write GPTQ's result (disk full?)", file(module).string()));
}

std::vector<std::string> GptqResults::read(const std::string& module) const {
  const fs::path f = file(module);
  std::ifstream in(f, std::ios::binary);
  uint64_t count = 0;
  in.read(reinterpret_cast<char*>(&count), sizeof count);
  std::vector<std::string> parts;
  for (uint64_t i = 0; in && i < count; ++i) {
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), sizeof n);
    std::string p(n, '\0');
    in.read(p.data(), static_cast<std::streamsize>(n));
    parts.push_back(std::move(p));
  }
  if (!in || parts.size() != count) throw Error(fmt::format("internal: {}: GPTQ's result for {} is incomplete", f.string(), module));
  in.close();
  std::error_code ec;
  fs::remove(f, ec); // read once: the output grows as the scratch shrinks
  return parts;
}

struct GptqStage::Loaded {
  CalibrationOptions options;
  std::optional<ModelFiles> files;
  ModelOnDevice model;
  CalibrationSamples samples;
  std::vector<HessianInput> inputs;
  std::vector<CalibrationPass> passes;
};

namespace {

void check_options(const CalibrationOptions& o) {
  if (o.file.empty())
    throw Error("method gptq needs --calibration FILE: a UTF-8 text the model reads to measure the inputs of its "
                "projections (or use --method rtn)");
  require_calibration_file(o.file);
  if (o.tokens < 2) throw Error(fmt::format("--calibration-tokens {}: a sample needs at least 2 tokens", o.tokens));
  if (o.samples < 1) throw Error(fmt::format("--calibration-samples {}: at least one sample is needed", o.samples));
  if (o.layers_per_pass < 0)
    throw Error(fmt::format("--calibration-layers-per-pass {}: give a number of layers, or 0 to fit --hessian-memory",
                            o.layers_per_pass));
}

std::string layers_text(const CalibrationPass& p, int64_t num_layers) {
  auto name = [&](int64_t l) { return l == num_layers ? std::string("lm_head") : std::to_string(l); };
  return p.first_layer == p.last_layer ? fmt::format("layer {}", name(p.first_layer))
                                       : fmt::format("layers {}-{}", name(p.first_layer), name(p.last_layer));
}

} // namespace

GptqStage::GptqStage(const fs::path& checkpoint, const QuantizePlan& plan, const CalibrationOptions& o, bool progress)
    : loaded_(std::make_unique<Loaded>()), plan_(plan), progress_(progress) {
  check_options(o);
  Loaded& l = *loaded_;
  l.options = o;
  ModelSource source;
  source.checkpoint = checkpoint.string();
  source.tool = "ninfer-quantize";
  source.max_context = o.tokens;
  source.no_cuda_graph = true; // only prompts are run, and observed rows are copied to the host
  try {
    l.files.emplace(open_model_files(source));
  } catch (const Error& e) {
    throw Error(fmt::format("calibration: {}", e.what()));
  }
  if (!l.files->tokenizer)
    throw Error(fmt::format("calibration: {} has no tokenizer.json; GPTQ reads the calibration text with the "
                            "checkpoint's own tokenizer",
                            checkpoint.string()));
  l.samples = calibration_samples(o.file, *l.files->tokenizer, o.tokens, o.samples);
  try {
    l.model = load_on_device(*l.files, DeviceChoice{o.device, o.plugin_dir, ""}, 1);
  } catch (const Error& e) {
    throw Error(fmt::format("calibration: the float model cannot be loaded on --device {}: {}", o.device, e.what()));
  }
  const int64_t num_layers = l.files->checkpoint.config().num_layers;
  l.inputs = hessian_inputs(plan, num_layers);
  l.passes = plan_passes(l.inputs, o.hessian_memory, o.layers_per_pass);

  const int64_t used = static_cast<int64_t>(l.samples.samples.size());
  progress_note(progress, fmt::format("calibration: {} samples of {} tokens from {} ({} tokens{}), on {} ({})", used,
                                      o.tokens, o.file.string(), l.samples.file_tokens,
                                      used < o.samples ? fmt::format("; {} samples asked", o.samples) : "",
                                      l.model.backend->device().name, l.model.backend->plugin().name()));
  uint64_t total = 0, largest_pass = 0, largest = 0;
  for (const auto& in : l.inputs) total += in.bytes(), largest = std::max(largest, in.bytes());
  std::string spans;
  for (const auto& p : l.passes) {
    largest_pass = std::max(largest_pass, p.bytes);
    spans += (spans.empty() ? "" : ", ") + layers_text(p, num_layers);
  }
  progress_note(progress, fmt::format("calibration: {} Hessians ({} in all) in {} pass(es) over the samples: {}; at "
                                      "most {} of Hessians at once, plus {} while the largest is solved",
                                      l.inputs.size(), format_bytes(total), l.passes.size(), spans,
                                      format_bytes(largest_pass), format_bytes(largest)));
  if (o.layers_per_pass == 0 && largest_pass > o.hessian_memory)
    progress_note(progress, fmt::format("calibration: a layer's Hessians take {}, over --hessian-memory {}: it gets a "
                                        "pass of its own",
                                        format_bytes(largest_pass), format_bytes(o.hessian_memory)));
}

GptqStage::~GptqStage() = default;

void GptqStage::run(const Checkpoint& ck, GptqResults& results) {
  Loaded& l = *loaded_;
  const int64_t num_layers = l.files->checkpoint.config().num_layers;
  CausalLM& lm = *l.model.lm;
  size_t solved = 0;
  for (size_t p = 0; p < l.passes.size(); ++p) {
    const CalibrationPass& pass = l.passes[p];
    const std::string what = fmt::format("pass {} of {} ({})", p + 1, l.passes.size(), layers_text(pass, num_layers));
    const auto start = std::chrono::steady_clock::now();
    HessianCollector collector(l.inputs, plan_, pass);
    // lm_head sees every row only when all logits are asked for.
    const bool head = pass.last_layer == num_layers;
    {
      ObservedLinears watch(*l.model.backend, collector);
      CountProgress bar(progress_, "calibration " + what + ": sample", l.samples.samples.size());
      for (size_t s = 0; s < l.samples.samples.size(); ++s) {
        lm.reset(0);
        (void)lm.prefill(0, l.samples.samples[s], head ? LogitsFor::All : LogitsFor::Last);
        bar.update(s + 1, "");
      }
    }
    const double forward = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    size_t modules = 0;
    for (size_t i : pass.inputs) modules += l.inputs[i].modules.size();
    CountProgress bar(progress_, "GPTQ " + what + ": module", modules);
    size_t done = 0;
    for (size_t i = 0; i < pass.inputs.size(); ++i) {
      const HessianInput& in = l.inputs[pass.inputs[i]];
      if (collector.rows(i) == 0)
        throw Error(fmt::format("internal: no calibration row reached {}", in.name));
      // One factorisation per damp among the input's modules (normally one for all of them).
      std::map<double, std::vector<size_t>> by_damp;
      for (size_t m : in.modules) by_damp[plan_.quantized[m].damp].push_back(m);
      std::vector<double> h = collector.take(i);
      for (auto it = by_damp.begin(); it != by_damp.end(); ++it) {
        const bool last = std::next(it) == by_damp.end();
        const GptqFactor f = gptq_factor(last ? std::move(h) : h, in.cols, it->first, plan_.actorder, in.name);
        for (size_t mi : it->second) {
          const PlannedModule& m = plan_.quantized[mi];
          bar.update(done, fmt::format("{} [{}, {}]", m.module, m.rows, m.cols));
          std::vector<float> w = to_f32(ck.tensor(m.tensor));
          const QuantizedWeights q = gptq_quantize(w.data(), m.rows, m.cols, m.group, grid_spec(m, plan_.format), f, m.tensor);
          w = {};
          results.write(m.module, module_tensor_bytes(q, m, plan_));
          bar.update(++done, m.module);
        }
      }
    }
    bar.finish();
    solved += done;
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress_note(progress_, fmt::format("calibration {}: {} rows per Hessian; forward and copies {}, Hessian sums {}, "
                                         "GPTQ of {} modules {}",
                                         what, collector.rows(0), format_duration(forward - collector.seconds_accumulating()),
                                         format_duration(collector.seconds_accumulating()), done,
                                         format_duration(total - forward)));
  }
  if (solved != plan_.quantized.size())
    throw Error(fmt::format("internal: GPTQ solved {} of {} modules", solved, plan_.quantized.size()));
}

} // namespace ninfer::quantize_detail
