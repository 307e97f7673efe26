#include "checkpoint_report.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/manifest/manifest.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"

namespace ninfer::tools {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxListed = 20; // tensor problems listed one per line; the rest are counted

// "1.41 GiB", or "12.0 MiB" below a GiB.
std::string gib(double bytes) {
  if (bytes >= 1024.0 * 1024.0 * 1024.0) return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
}

// Every expected tensor: present, of the config's shape, in a dtype the loader reads. All
// problems are collected (a broken download usually has many).
CheckpointCheck check_tensors(const Checkpoint& ck) {
  std::vector<std::string> problems;
  size_t count = 0;
  std::map<std::string, size_t> dtypes;
  for (const ExpectedTensor& e : expected_tensors(ck.config())) {
    ++count;
    if (!ck.has(e.name)) {
      problems.push_back(fmt::format("{} is missing", e.name));
      continue;
    }
    const TensorView& t = ck.tensor(e.name);
    if (t.shape != e.shape)
      problems.push_back(fmt::format("{} has shape {}, config.json implies {} ({})", e.name, shape_string(t.shape),
                                     shape_string(e.shape), e.origin));
    ++dtypes[dtype_name(t.dtype)];
  }
  CheckpointCheck c{"tensors", problems.empty(), ""};
  if (problems.empty()) {
    std::string kinds;
    for (const auto& [d, n] : dtypes) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, d);
    c.detail = fmt::format("all {} tensors the model reads, shapes as config.json implies ({})", count, kinds);
  } else {
    c.detail = fmt::format("{} of {} tensors are missing or misshapen:", problems.size(), count);
    for (size_t i = 0; i < problems.size() && i < kMaxListed; ++i) c.detail += "\n    " + problems[i];
    if (problems.size() > kMaxListed) c.detail += fmt::format("\n    ... and {} more", problems.size() - kMaxListed);
  }
  return c;
}

CheckpointCheck check_tokenizer(const fs::path& dir, const ModelConfig* cfg) {
  const fs::path file = dir / "tokenizer.json";
  if (!fs::exists(file))
    return {"tokenizer", false,
            "no tokenizer.json: text prompts and chat need one (download it with the weights, or name one in a "
            "manifest's `tokenizer:`); --prompt-ids still works"};
  try {
    const Tokenizer tok = Tokenizer::load(file);
    if (cfg && tok.vocab_size() > cfg->vocab_size)
      return {"tokenizer", false,
              fmt::format("tokenizer.json has {} tokens but the embedding has {} rows: it belongs to another model",
                          tok.vocab_size(), cfg->vocab_size)};
    return {"tokenizer", true,
            fmt::format("tokenizer.json, {} tokens{}", tok.vocab_size(),
                        fs::exists(dir / "tokenizer_config.json") ? ", tokenizer_config.json" : "")};
  } catch (const Error& e) {
    return {"tokenizer", false, e.what()};
  }
}

// Weights as the loader keeps them by default (BF16 and F32 as stored, F16 widened to F32), the
// KV cache of one sequence at `context` in float16 (CUDA's default) and float32 (the CPU's), and
// a Gated DeltaNet model's recurrent state.
CheckpointCheck memory_estimate(const Checkpoint& ck, int64_t context) {
  const ModelConfig& cfg = ck.config();
  double weights = 0;
  for (const ExpectedTensor& e : expected_tensors(cfg)) {
    if (!ck.has(e.name)) continue;
    const TensorView& t = ck.tensor(e.name);
    weights += static_cast<double>(t.numel()) * (t.dtype == DType::BF16 ? 2.0 : 4.0);
  }
  const double kv_per_token = 2.0 * static_cast<double>(cfg.num_layers_of(LayerKind::FullAttention)) *
                              static_cast<double>(cfg.num_key_value_heads * cfg.head_dim);
  const double state = static_cast<double>(cfg.num_layers_of(LayerKind::LinearAttention)) * 4.0 *
                       static_cast<double>(cfg.linear_num_value_heads * cfg.linear_key_head_dim *
                                               cfg.linear_value_head_dim +
                                           cfg.linear_conv_dim() * cfg.linear_conv_kernel_dim);
  const double ctx = static_cast<double>(context);
  std::string d = fmt::format("weights {}; KV cache for one sequence of {} tokens: {} in float16 (CUDA's default), "
                              "{} in float32 (the CPU's)",
                              gib(weights), context, gib(kv_per_token * ctx * 2), gib(kv_per_token * ctx * 4));
  if (state > 0) d += fmt::format("; Gated DeltaNet state {} per sequence", gib(state));
  d += fmt::format("\n    total about {} on CUDA, {} on the CPU, plus activations and workspace (ninfer-run -v "
                   "prints the whole budget)",
                   gib(weights + kv_per_token * ctx * 2 + state), gib(weights + kv_per_token * ctx * 4 + state));
  return {"memory", true, d};
}

} // namespace

int CheckpointReport::problems() const {
  int n = 0;
  for (const auto& c : checks) n += c.ok ? 0 : 1;
  return n;
}

CheckpointReport check_checkpoint(const fs::path& dir, std::optional<int64_t> context) {
  CheckpointReport r;
  r.dir = dir;
  if (!fs::is_directory(dir)) {
    r.checks.push_back({"folder", false, "not a folder"});
    return r;
  }
  std::optional<Checkpoint> ck;
  try {
    ck = Checkpoint::open(dir); // config.json, then every safetensors header (nothing is read)
  } catch (const Error& e) {
    r.checks.push_back({"files", false, e.what()});
  }
  if (ck) {
    const ModelConfig& cfg = ck->config();
    double params = 0;
    for (const ExpectedTensor& e : expected_tensors(cfg)) {
      double n = 1;
      for (int64_t x : e.shape) n *= static_cast<double>(x);
      params += n;
    }
    r.checks.push_back({"files", true,
                        fmt::format("{} safetensors file(s), {}", ck->files().size(),
                                    gib(static_cast<double>(ck->data_bytes())))});
    r.checks.push_back({"config", true,
                        fmt::format("{} ({}, {}): {} layers, hidden {}, vocab {}, {:.2f} B parameters{}",
                                    family_name(cfg.family), cfg.model_type, cfg.architecture, cfg.num_layers,
                                    cfg.hidden_size, cfg.vocab_size, params / 1e9,
                                    cfg.random_weights ? " (RANDOM weights)" : "")});
    r.checks.push_back(check_tensors(*ck));
  }
  r.checks.push_back(check_tokenizer(dir, ck ? &ck->config() : nullptr));
  if (ck) {
    const int64_t ctx = context.value_or(ck->config().max_position_embeddings);
    r.checks.push_back(memory_estimate(*ck, ctx));
  }
  return r;
}

std::string report_text(const CheckpointReport& r) {
  std::string out = fmt::format("Checkpoint {}\n", r.dir.string());
  for (const auto& c : r.checks) out += fmt::format("  {:<10} {}: {}\n", c.item, c.ok ? "ok" : "PROBLEM", c.detail);
  const int n = r.problems();
  out += n == 0 ? "ready to run\n" : fmt::format("{} problem(s): fix them before loading this folder\n", n);
  return out;
}

} // namespace ninfer::tools
