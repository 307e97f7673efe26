#include "ninfer/quantize/quantize_checkpoint.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/json_fields.hpp"
#include "ninfer/quantize/output_folder.hpp"
#include "ninfer/quantize/quant_config.hpp"
#include "ninfer/quantize/quantize_plan.hpp"
#include "ninfer/quantize/rtn.hpp"
#include "ninfer/support/error.hpp"
#include "gptq_stage.hpp"
#include "module_tensors.hpp"
#include "quantize_progress.hpp"

namespace ninfer {

namespace fs = std::filesystem;
using quantize_detail::QuantizeProgress;

namespace {

// Files of the input folder that are weights (never copied: the output has its own).
bool weight_file(const std::string& name) {
  for (const char* ext : {".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".msgpack", ".h5"})
    if (name.size() >= std::strlen(ext) && name.compare(name.size() - std::strlen(ext), std::strlen(ext), ext) == 0)
      return true;
  return name == "model.safetensors.index.json" || name == "pytorch_model.bin.index.json";
}

// One input tensor becomes one output unit: its copy, or the packed tensors of its module.
struct Unit {
  const TensorView* source = nullptr;
  std::optional<PlannedModule> module;
};

std::vector<OutputTensor> unit_outputs(const Unit& u, size_t index, const QuantizePlan& plan) {
  if (!u.module)
    return {OutputTensor{u.source->name, dtype_name(u.source->dtype), u.source->shape, u.source->bytes, index}};
  return quantize_detail::module_tensors(*u.module, plan, index);
}

// The bytes of every output tensor of the unit being written, made when its first is asked for:
// round to nearest on the spot, or GPTQ's result from its scratch file.
class UnitBytes {
 public:
  UnitBytes(const QuantizePlan& plan, const quantize_detail::GptqResults* gptq) : plan_(plan), gptq_(gptq) {}

  void fill(const Unit& u, size_t index, size_t part, std::span<std::byte> dst) {
    if (!u.module) {
      std::memcpy(dst.data(), u.source->data, dst.size());
      return;
    }
    if (index != current_) make(u, index);
    const std::string& b = parts_.at(part);
    if (b.size() != dst.size())
      throw Error(fmt::format("internal: {} part {} has {} bytes, expected {}", u.module->module, part, b.size(),
                              dst.size()));
    std::memcpy(dst.data(), b.data(), b.size());
  }

 private:
  void make(const Unit& u, size_t index) {
    const PlannedModule& m = *u.module;
    if (gptq_) {
      parts_ = gptq_->read(m.module);
    } else {
      std::vector<float> w = to_f32(*u.source);
      const QuantizedWeights q = rtn_quantize(w.data(), m.rows, m.cols, m.group, grid_spec(m, plan_.format), m.tensor);
      w = {};
      parts_ = quantize_detail::module_tensor_bytes(q, m, plan_);
    }
    current_ = index;
  }

  const QuantizePlan& plan_;
  const quantize_detail::GptqResults* gptq_;
  size_t current_ = SIZE_MAX;
  std::vector<std::string> parts_;
};

// The input's pages of a tensor already written are not needed again: dropping them keeps the
// resident set near one tensor (they come back from the file if touched).
void release_pages(const TensorView& t) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(t.data) + t.bytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

std::optional<size_t> kill_after() {
  const char* s = std::getenv("NINFER_QUANTIZE_TEST_KILL_AFTER");
  if (!s || !*s) return std::nullopt;
  return static_cast<size_t>(std::strtoull(s, nullptr, 10));
}

nlohmann::ordered_json read_config(const fs::path& dir) {
  const fs::path file = dir / "config.json";
  nlohmann::ordered_json cfg = read_json_file(file, kMaxConfigJsonBytes); // in the file's key order
  for (const char* key : {"quantization_config", "compression_config"}) {
    const bool top = cfg.contains(key);
    const bool text = cfg.contains("text_config") && cfg["text_config"].is_object() && cfg["text_config"].contains(key);
    if (top || text)
      throw Error(fmt::format("{}: the checkpoint is already quantized ({}{} is set); ninfer-quantize reads bf16, "
                              "fp16 or fp32 checkpoints",
                              file.string(), text && !top ? "text_config." : "", key));
  }
  return cfg;
}

// Whether `inner` lies below `outer` (both absolute and normal; the same path is not below).
bool within(const fs::path& inner, fs::path outer) {
  if (!outer.has_filename()) outer = outer.parent_path(); // a trailing separator
  auto i = inner.begin();
  for (const fs::path& part : outer) {
    if (i == inner.end() || *i != part) return false;
    ++i;
  }
  return i != inner.end() && !i->empty();
}

} // namespace

QuantizeSummary quantize_checkpoint(const QuantizeOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  check_recipe(o.recipe);
  if (o.recipe.method == QuantizeMethod::Rtn && !o.calibration.file.empty())
    throw Error(fmt::format("--calibration {} is given, but {} quantizes with method rtn, which reads no activations; "
                            "use method gptq (--method gptq or the recipe's method: gptq) or drop --calibration",
                            o.calibration.file.string(), o.recipe.origin));
  std::error_code ec;
  if (!fs::is_directory(o.checkpoint, ec))
    throw Error(fmt::format("--checkpoint {}: not a folder (a Hugging Face checkpoint with config.json and "
                            "*.safetensors)",
                            o.checkpoint.string()));
  if (o.out.empty()) throw Error("--out is empty: name the folder to write the quantized checkpoint to");
  if (fs::exists(o.out, ec) && fs::equivalent(o.checkpoint, o.out, ec))
    throw Error(fmt::format("--out {} is the input checkpoint itself; write the quantized one elsewhere",
                            o.out.string()));
  // --force replaces --out whole: a folder holding the input would take the input with it.
  const fs::path in = fs::weakly_canonical(o.checkpoint, ec), out = fs::weakly_canonical(o.out, ec);
  if (within(in, out))
    throw Error(fmt::format("--out {} holds the input checkpoint {}; write the quantized one elsewhere",
                            o.out.string(), o.checkpoint.string()));
  if (within(out, in))
    throw Error(fmt::format("--out {} is inside the input checkpoint {}; write the quantized one elsewhere",
                            o.out.string(), o.checkpoint.string()));
  nlohmann::ordered_json config = read_config(o.checkpoint);
  const Checkpoint ck = Checkpoint::open(o.checkpoint);
  require_all(ck);
  const QuantizePlan plan = plan_quantization(ck, o.recipe);

  // Every input tensor, in name order, as one unit; unreadable ones stop here, before writing.
  std::map<std::string, const PlannedModule*> by_tensor;
  for (const auto& m : plan.quantized) by_tensor[m.tensor] = &m;
  std::vector<Unit> units;
  std::vector<OutputTensor> outputs;
  std::vector<size_t> part_of; // outputs[i] is part part_of[i] of its unit
  uint64_t bytes_in = 0;
  for (const std::string& name : ck.names()) {
    if (!ck.has(name))
      throw Error(fmt::format("{}; ninfer-quantize copies every tensor it does not quantize and cannot copy this one",
                              [&] {
                                try {
                                  (void)ck.tensor(name);
                                } catch (const Error& e) {
                                  return std::string(e.what());
                                }
                                return name;
                              }()));
    Unit u;
    u.source = &ck.tensor(name);
    if (auto it = by_tensor.find(name); it != by_tensor.end()) u.module = *it->second;
    bytes_in += u.source->bytes;
    auto outs = unit_outputs(u, units.size(), plan);
    for (size_t p = 0; p < outs.size(); ++p) {
      outputs.push_back(std::move(outs[p]));
      part_of.push_back(p);
    }
    units.push_back(std::move(u));
  }

  StagingFolder staging(o.out, o.force); // refuses an --out in the way before GPTQ's long work
  std::optional<quantize_detail::GptqResults> solved;
  if (plan.method == QuantizeMethod::Gptq) {
    // The calibration text and the float model are checked and loaded first: their problems end
    // the run with nothing but the empty staging folder written (and removed).
    quantize_detail::GptqStage gptq(o.checkpoint, plan, o.calibration, o.progress);
    solved.emplace(staging.path() / ".gptq-results");
    gptq.run(ck, *solved);
  } // the float model's memory is freed before writing
  const auto shards = plan_shards(outputs, o.max_shard_bytes);
  QuantizeProgress progress(o.progress, units.size(), bytes_in);
  UnitBytes unit_bytes(plan, solved ? &*solved : nullptr);
  const std::optional<size_t> kill = kill_after();
  std::map<std::string, std::string> weight_map;
  size_t units_done = 0;
  uint64_t bytes_done = 0, bytes_out = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    const auto [begin, end] = shards[s];
    const std::string file = shard_file_name(s, shards.size());
    std::span<const OutputTensor> tensors(outputs.data() + begin, end - begin);
    write_safetensors_shard(staging.path() / file, tensors, [&](size_t i, std::span<std::byte> dst) {
      const OutputTensor& t = outputs[begin + i];
      const Unit& u = units[t.unit];
      unit_bytes.fill(u, t.unit, part_of[begin + i], dst);
      const bool last_part = begin + i + 1 == outputs.size() || outputs[begin + i + 1].unit != t.unit;
      if (!last_part) return;
      ++units_done;
      bytes_done += u.source->bytes;
      release_pages(*u.source);
      progress.update(units_done, bytes_done, u.source->name);
      if (kill && units_done >= *kill) std::raise(SIGKILL);
    });
    for (const auto& t : tensors) {
      weight_map[t.name] = file;
      bytes_out += t.bytes;
    }
  }
  progress.finish();
  solved.reset(); // its scratch folder, empty by now, goes before the output is renamed into place

  if (shards.size() > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", bytes_out}};
    index["weight_map"] = nlohmann::ordered_json::object();
    for (const auto& [name, file] : weight_map) index["weight_map"][name] = file;
    write_file_synced(staging.path() / "model.safetensors.index.json", index.dump(2) + "\n");
  }
  // Published quantized Qwen3.5 checkpoints keep quantization_config at the top level, beside
  // text_config, where transformers and vLLM look for it.
  config["quantization_config"] = quantization_config(plan);
  write_file_synced(staging.path() / "config.json", config.dump(2) + "\n");
  for (const auto& e : fs::directory_iterator(o.checkpoint)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.' || name == "config.json" || weight_file(name) || !e.is_regular_file()) continue;
    copy_file_synced(e.path(), staging.path() / name);
    spdlog::debug("copied {}", name);
  }
  staging.commit();

  QuantizeSummary sum;
  sum.out = staging.target();
  sum.tensors_in = units.size();
  sum.modules_quantized = plan.quantized.size();
  sum.tensors_copied = plan.copied.size();
  sum.shards = shards.size();
  sum.bytes_in = bytes_in;
  sum.bytes_out = bytes_out;
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sum;
}

} // namespace ninfer
