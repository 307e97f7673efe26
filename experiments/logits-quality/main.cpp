// logits-quality: how far a compact KV cache format, or another copy of the weights (a quantized
// checkpoint), moves a model's logits. The text is tokenized and cut into windows of --window
// tokens; each window is prefilled from position 0 (its logits at every position,
// teacher-forced) once for the reference (--checkpoint over a --reference cache) and once for
// each variant, and every position's logits row is compared: relative L2 distance to the
// reference row, whether the argmax (top-1 token) agrees, and the perplexity of the text's next
// tokens. docs/kv-cache.md and docs/quantization.md have the tables and the commands.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ninfer/models/model_setup.hpp"
#include "ninfer/support/error.hpp"

using namespace ninfer;

namespace {

struct Options {
  std::string checkpoint, text, device = "cpu", reference = "float32";
  std::vector<std::string> formats{"int8", "fp8", "int4r"};
  std::vector<std::string> weights; // NAME=DIR
  int64_t window = 1024, positions = 10240;
};

struct Variant {
  std::string name, checkpoint, kv;
};

struct Row {
  double rel_l2;
  bool top1;
};

// Logits rows of every window, [positions, vocab] in window order.
std::vector<float> window_logits(const Options& o, const Variant& v, const std::vector<std::vector<int32_t>>& windows) {
  ModelFiles f = open_model_files({.checkpoint = v.checkpoint, .tool = "logits-quality"});
  f.manifest.runtime.kv_dtype = parse_kv_dtype_option(v.kv);
  f.manifest.runtime.max_context = o.window;
  const ModelOnDevice m = load_on_device(f, {o.device, "", ""}, 1, static_cast<int32_t>(o.window));
  std::vector<float> all;
  for (const auto& w : windows) {
    m.lm->reset(0);
    const std::vector<float> l = m.lm->prefill(0, w, LogitsFor::All);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

std::vector<Row> compare(const std::vector<float>& got, const std::vector<float>& ref, int64_t vocab) {
  std::vector<Row> rows;
  for (size_t r = 0; r * vocab < ref.size(); ++r) {
    const float* a = got.data() + r * vocab;
    const float* b = ref.data() + r * vocab;
    double d2 = 0, n2 = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      d2 += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      n2 += double(b[i]) * b[i];
    }
    rows.push_back({std::sqrt(d2 / n2), std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b});
  }
  return rows;
}

// exp of the mean negative log-likelihood of each window's next tokens (every position but the
// window's last), from float64 log-softmax of the rows.
double perplexity(const std::vector<float>& logits, const std::vector<std::vector<int32_t>>& windows, int64_t vocab) {
  double nll = 0;
  int64_t n = 0;
  size_t row = 0;
  for (const auto& w : windows)
    for (size_t p = 0; p < w.size(); ++p, ++row) {
      if (p + 1 == w.size()) continue;
      const float* x = logits.data() + row * vocab;
      const double mx = *std::max_element(x, x + vocab);
      double sum = 0;
      for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(x[i]) - mx);
      nll += mx + std::log(sum) - x[w[p + 1]];
      ++n;
    }
  return std::exp(nll / static_cast<double>(n));
}

std::vector<Variant> variants(const Options& o) {
  std::vector<Variant> out;
  for (const std::string& kv : o.formats) out.push_back({"kv " + kv, o.checkpoint, kv});
  for (const std::string& w : o.weights) {
    const size_t eq = w.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == w.size())
      throw Error(fmt::format("--weights {}: expected NAME=CHECKPOINT_DIR", w));
    out.push_back({"weights " + w.substr(0, eq), w.substr(eq + 1), o.reference});
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"logits-quality: logits over a compact KV cache, or of a quantized copy of the weights, against the "
               "reference model, teacher-forced over a text"};
  app.add_option("--checkpoint", o.checkpoint, "Reference checkpoint folder (with its tokenizer)")->required();
  app.add_option("--text", o.text, "UTF-8 text file")->required();
  app.add_option("--window", o.window, "Tokens per window (each prefilled from position 0)")->check(CLI::PositiveNumber);
  app.add_option("--positions", o.positions, "Positions compared (windows of the text's first tokens)")
      ->check(CLI::PositiveNumber);
  app.add_option("--kv-dtype", o.formats, "KV formats compared on the reference weights (int8, fp8, int4r, float16, "
                                          "bfloat16; 'none': no format)")
      ->delimiter(',');
  app.add_option("--weights", o.weights, "NAME=CHECKPOINT_DIR: another copy of the weights (same tokenizer), over the "
                                         "reference cache; repeatable");
  app.add_option("--reference", o.reference, "The reference cache (float32)");
  app.add_option("--device", o.device, "Device (cpu)");
  CLI11_PARSE(app, argc, argv);
  if (o.formats.size() == 1 && o.formats[0] == "none") o.formats.clear();
  try {
    ModelFiles files = open_model_files({.checkpoint = o.checkpoint, .tool = "logits-quality"});
    if (!files.tok()) throw Error("the checkpoint has no tokenizer");
    std::ifstream in(o.text);
    if (!in) throw Error("cannot read " + o.text);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::vector<int32_t> ids = files.tok()->encode(ss.str());
    std::vector<std::vector<int32_t>> windows;
    for (int64_t at = 0; at + o.window <= static_cast<int64_t>(ids.size()) &&
                         static_cast<int64_t>(windows.size()) * o.window < o.positions;
         at += o.window)
      windows.emplace_back(ids.begin() + at, ids.begin() + at + o.window);
    const int64_t positions = static_cast<int64_t>(windows.size()) * o.window;
    if (positions < o.positions)
      throw Error(fmt::format("the text has {} tokens, {} positions asked in windows of {}", ids.size(), o.positions,
                              o.window));
    const int64_t vocab = files.checkpoint.config().vocab_size;
    const std::vector<Variant> compared = variants(o);
    const std::vector<float> ref = window_logits(o, {"reference", o.checkpoint, o.reference}, windows);
    fmt::print("{} positions ({} windows of {} tokens) of {}; reference {} with a {} KV cache, perplexity {:.3f}\n",
               positions, windows.size(), o.window, o.text, o.checkpoint, o.reference,
               perplexity(ref, windows, vocab));
    fmt::print("| variant | perplexity | logits rel-L2 mean | rel-L2 p99 | rel-L2 max | top-1 agreement |\n"
               "|---|---|---|---|---|---|\n");
    for (const Variant& v : compared) {
      const std::vector<float> got = window_logits(o, v, windows);
      if (got.size() != ref.size()) throw Error(fmt::format("{} has another vocabulary than the reference", v.checkpoint));
      std::vector<Row> rows = compare(got, ref, vocab);
      double sum = 0;
      int64_t agree = 0;
      std::vector<double> e;
      for (const Row& r : rows) {
        sum += r.rel_l2;
        agree += r.top1;
        e.push_back(r.rel_l2);
      }
      std::sort(e.begin(), e.end());
      fmt::print("| {} | {:.3f} | {:.2e} | {:.2e} | {:.2e} | {:.2f}% ({} of {}) |\n", v.name,
                 perplexity(got, windows, vocab), sum / rows.size(), e[static_cast<size_t>(0.99 * (e.size() - 1))],
                 e.back(), 100.0 * agree / rows.size(), agree, rows.size());
    }
  } catch (const std::exception& e) {
    std::cerr << "logits-quality: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
