#include "quant_layouts.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant_weight_case.hpp"

namespace ninfer::test {
namespace {

int32_t abi_dtype(const std::string& d) {
  return d == "F32" ? NINFER_DTYPE_F32 : d == "BF16" ? NINFER_DTYPE_BF16 : NINFER_DTYPE_F16;
}

// `count` random scales stored in `dtype`: the raw bytes and their values.
struct Scales {
  std::string bytes;
  std::vector<double> values;
};
Scales random_scales(std::mt19937_64& rng, const std::string& dtype, size_t count, double lo = 0.004,
                     double hi = 0.05) {
  std::vector<uint8_t> raw;
  for (size_t i = 0; i < count; ++i) push_scale(raw, abi_dtype(dtype), rng, lo, hi);
  Scales s;
  s.bytes.assign(raw.begin(), raw.end());
  for (size_t i = 0; i < count; ++i) s.values.push_back(decode_scale(raw, abi_dtype(dtype), i));
  return s;
}

std::string bytes_of(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

int uniform(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// The group of each input channel: k / group, or (act order) those groups' members shuffled.
std::vector<int32_t> channel_groups(std::mt19937_64& rng, const LayoutCase& c) {
  std::vector<int32_t> g(static_cast<size_t>(c.K));
  for (int32_t k = 0; k < c.K; ++k) g[static_cast<size_t>(k)] = c.group_of(k);
  if (c.act_order) std::shuffle(g.begin(), g.end(), rng);
  return g;
}

} // namespace

std::string LayoutCase::describe() const {
  return std::to_string(N) + "x" + std::to_string(K) + " " + std::to_string(bits) + "-bit g" + std::to_string(group) +
         " " + scale_dtype + (symmetric ? " sym" : " asym") + (gptq_v2 ? " v2" : "") + (act_order ? " act-order" : "") +
         (block_rows ? " block " + std::to_string(block_rows) + "x" + std::to_string(block_cols) : "");
}

RawTensor i32_tensor(std::vector<int64_t> shape, const std::vector<uint32_t>& words) {
  return {"I32", std::move(shape), bytes_of(words.data(), words.size() * 4)};
}

// GPTQ: qweight [K·bits/32, N], element (32/bits)·r + j of column n at bits·j of row r; qzeros
// [G, N·bits/32] alike along N, holding z − 1 (gptq) or z (gptq_v2); scales [G, N]; g_idx [K].
PackedModule pack_gptq(std::mt19937_64& rng, const LayoutCase& c, const std::string& module) {
  const int32_t pf = 32 / c.bits, G = c.groups(), N = c.N, K = c.K, top = (1 << c.bits) - 1;
  std::vector<uint32_t> q(static_cast<size_t>(K) * N), z(static_cast<size_t>(G) * N);
  for (auto& v : q) v = static_cast<uint32_t>(uniform(rng, 0, top));
  for (auto& v : z) {
    if (c.symmetric) v = 1u << (c.bits - 1);
    // v1 cannot store a zero of 0 (it would be -1); 4-bit v1 reaches 16 (a stored 15).
    else v = static_cast<uint32_t>(c.gptq_v2 ? uniform(rng, 0, top) : uniform(rng, 1, c.bits == 4 ? 16 : 255));
  }
  const Scales s = random_scales(rng, c.scale_dtype, static_cast<size_t>(G) * N);
  const std::vector<int32_t> g = channel_groups(rng, c);
  PackedModule p;
  std::vector<uint32_t> qweight(static_cast<size_t>(K / pf) * N, 0), qzeros(static_cast<size_t>(G) * (N / pf), 0);
  for (int32_t k = 0; k < K; ++k)
    for (int32_t n = 0; n < N; ++n) qweight[static_cast<size_t>(k / pf) * N + n] |= q[static_cast<size_t>(k) * N + n] << (c.bits * (k % pf));
  for (int32_t gi = 0; gi < G; ++gi)
    for (int32_t n = 0; n < N; ++n) {
      const uint32_t stored = (z[static_cast<size_t>(gi) * N + n] - (c.gptq_v2 ? 0 : 1)) & static_cast<uint32_t>(top);
      qzeros[static_cast<size_t>(gi) * (N / pf) + n / pf] |= stored << (c.bits * (n % pf));
    }
  p.tensors[module + ".qweight"] = i32_tensor({K / pf, N}, qweight);
  p.tensors[module + ".qzeros"] = i32_tensor({G, N / pf}, qzeros);
  p.tensors[module + ".scales"] = {c.scale_dtype, {G, N}, s.bytes};
  p.tensors[module + ".g_idx"] = i32_tensor({K}, std::vector<uint32_t>(g.begin(), g.end()));
  p.config = {{"quant_method", "gptq"}, {"bits", c.bits},       {"group_size", c.group},
              {"sym", c.symmetric},     {"desc_act", c.act_order}, {"checkpoint_format", c.gptq_v2 ? "gptq_v2" : "gptq"}};
  p.weights.resize(static_cast<size_t>(N) * K);
  for (int32_t n = 0; n < N; ++n)
    for (int32_t k = 0; k < K; ++k) {
      const size_t gz = static_cast<size_t>(g[static_cast<size_t>(k)]) * N + n;
      p.weights[static_cast<size_t>(n) * K + k] = (double(q[static_cast<size_t>(k) * N + n]) - z[gz]) * s.values[gz];
    }
  return p;
}

// AWQ GEMM: qweight [K, N/8] and qzeros [G, N/8], nibble i of word c holding column
// 8c + [0, 2, 4, 6, 1, 3, 5, 7][i]; scales [G, N]; W = (q − z) · s of group k / g.
PackedModule pack_awq(std::mt19937_64& rng, const LayoutCase& c, const std::string& module) {
  static const int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const int32_t G = c.groups(), N = c.N, K = c.K;
  std::vector<uint32_t> q(static_cast<size_t>(K) * N), z(static_cast<size_t>(G) * N);
  for (auto& v : q) v = static_cast<uint32_t>(uniform(rng, 0, 15));
  for (auto& v : z) v = static_cast<uint32_t>(uniform(rng, 0, 15));
  const Scales s = random_scales(rng, c.scale_dtype, static_cast<size_t>(G) * N);
  auto pack = [&](const std::vector<uint32_t>& v, int32_t rows) {
    std::vector<uint32_t> out(static_cast<size_t>(rows) * (N / 8), 0);
    for (int32_t r = 0; r < rows; ++r)
      for (int32_t w = 0; w < N / 8; ++w)
        for (int i = 0; i < 8; ++i)
          out[static_cast<size_t>(r) * (N / 8) + w] |= v[static_cast<size_t>(r) * N + 8 * w + kOrder[i]] << (4 * i);
    return out;
  };
  PackedModule p;
  p.tensors[module + ".qweight"] = i32_tensor({K, N / 8}, pack(q, K));
  p.tensors[module + ".qzeros"] = i32_tensor({G, N / 8}, pack(z, G));
  p.tensors[module + ".scales"] = {c.scale_dtype, {G, N}, s.bytes};
  p.config = {{"quant_method", "awq"}, {"bits", 4}, {"group_size", c.group}, {"zero_point", true}, {"version", "gemm"}};
  p.weights.resize(static_cast<size_t>(N) * K);
  for (int32_t n = 0; n < N; ++n)
    for (int32_t k = 0; k < K; ++k) {
      const size_t gz = static_cast<size_t>(c.group_of(k)) * N + n;
      p.weights[static_cast<size_t>(n) * K + k] = (double(q[static_cast<size_t>(k) * N + n]) - z[gz]) * s.values[gz];
    }
  return p;
}

// compressed-tensors pack-quantized: signed q in [-2^(b-1), 2^(b-1)), stored q + 2^(b-1) in
// weight_packed [N, ceil(K·b/32)] (element j of a word at b·j along K); asymmetric: signed zero
// points stored + 2^(b-1) in weight_zero_point [ceil(N·b/32), G], packed along N;
// weight_scale [N, G]; weight_shape [N, K]; W = (q − zp) · s.
PackedModule pack_compressed_tensors(std::mt19937_64& rng, const LayoutCase& c, const std::string& module) {
  const int32_t pf = 32 / c.bits, G = c.groups(), N = c.N, K = c.K, half = 1 << (c.bits - 1);
  std::vector<int32_t> q(static_cast<size_t>(N) * K), zp(static_cast<size_t>(N) * G, 0);
  for (auto& v : q) v = uniform(rng, -half, half - 1);
  if (!c.symmetric)
    for (auto& v : zp) v = uniform(rng, -half, half - 1);
  const Scales s = random_scales(rng, c.scale_dtype, static_cast<size_t>(N) * G);
  const std::vector<int32_t> g = channel_groups(rng, c);
  const int32_t words = (K + pf - 1) / pf;
  std::vector<uint32_t> packed(static_cast<size_t>(N) * words, 0);
  for (int32_t n = 0; n < N; ++n)
    for (int32_t k = 0; k < K; ++k)
      packed[static_cast<size_t>(n) * words + k / pf] |= static_cast<uint32_t>(q[static_cast<size_t>(n) * K + k] + half)
                                                         << (c.bits * (k % pf));
  PackedModule p;
  p.tensors[module + ".weight_packed"] = i32_tensor({N, words}, packed);
  p.tensors[module + ".weight_scale"] = {c.scale_dtype, {N, G}, s.bytes};
  const int64_t shape[2] = {N, K};
  p.tensors[module + ".weight_shape"] = {"I64", {2}, bytes_of(shape, sizeof shape)};
  if (!c.symmetric) {
    const int32_t zrows = (N + pf - 1) / pf;
    std::vector<uint32_t> zpacked(static_cast<size_t>(zrows) * G, 0);
    for (int32_t n = 0; n < N; ++n)
      for (int32_t gi = 0; gi < G; ++gi)
        zpacked[static_cast<size_t>(n / pf) * G + gi] |= static_cast<uint32_t>(zp[static_cast<size_t>(n) * G + gi] + half)
                                                        << (c.bits * (n % pf));
    p.tensors[module + ".weight_zero_point"] = i32_tensor({zrows, G}, zpacked);
  }
  if (c.act_order) p.tensors[module + ".weight_g_idx"] = i32_tensor({K}, std::vector<uint32_t>(g.begin(), g.end()));
  nlohmann::json weights = {{"num_bits", c.bits},           {"type", "int"},
                            {"symmetric", c.symmetric},     {"strategy", c.group > 0 ? "group" : "channel"},
                            {"group_size", c.group > 0 ? nlohmann::json(c.group) : nlohmann::json()},
                            {"dynamic", false},             {"actorder", c.act_order ? nlohmann::json("group") : nlohmann::json()}};
  p.config = {{"quant_method", "compressed-tensors"},
              {"format", "pack-quantized"},
              {"quantization_status", "compressed"},
              {"config_groups",
               {{"group_0",
                 {{"targets", {"Linear"}}, {"input_activations", nullptr}, {"output_activations", nullptr},
                  {"weights", weights}}}}},
              {"ignore", {"lm_head"}}};
  p.weights.resize(static_cast<size_t>(N) * K);
  for (int32_t n = 0; n < N; ++n)
    for (int32_t k = 0; k < K; ++k) {
      const size_t gs = static_cast<size_t>(n) * G + g[static_cast<size_t>(k)];
      p.weights[static_cast<size_t>(n) * K + k] = (double(q[static_cast<size_t>(n) * K + k]) - zp[gs]) * s.values[gs];
    }
  return p;
}

// FP8 block: weight F8_E4M3 [N, K], weight_scale_inv [ceil(N/bn), ceil(K/bk)];
// W = e4m3(w) · scale_inv of the block.
PackedModule pack_fp8_block(std::mt19937_64& rng, const LayoutCase& c, const std::string& module) {
  const int32_t N = c.N, K = c.K, bn = c.block_rows, bk = c.block_cols;
  const int32_t GR = (N + bn - 1) / bn, GC = (K + bk - 1) / bk;
  std::string codes(static_cast<size_t>(N) * K, '\0');
  for (auto& b : codes) {
    int v = uniform(rng, 0, 255);
    if ((v & 0x7f) == 0x7f) v -= 1; // not NaN
    b = static_cast<char>(v);
  }
  const Scales s = random_scales(rng, c.scale_dtype, static_cast<size_t>(GR) * GC, 1e-4, 2e-3);
  PackedModule p;
  p.tensors[module + ".weight"] = {"F8_E4M3", {N, K}, codes};
  p.tensors[module + ".weight_scale_inv"] = {c.scale_dtype, {GR, GC}, s.bytes};
  p.config = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
              {"weight_block_size", {bn, bk}}};
  p.weights.resize(static_cast<size_t>(N) * K);
  for (int32_t n = 0; n < N; ++n)
    for (int32_t k = 0; k < K; ++k)
      p.weights[static_cast<size_t>(n) * K + k] =
          decode_e4m3(static_cast<uint8_t>(codes[static_cast<size_t>(n) * K + k])) *
          s.values[static_cast<size_t>(n / bn) * GC + k / bk];
  return p;
}

void write_quantized_checkpoint(const std::filesystem::path& dir, const nlohmann::json& quantization_config,
                                const RawTensors& tensors) {
  copy_fixture_config("tiny-qwen3", dir);
  nlohmann::json cfg = read_json(dir / "config.json");
  cfg["quantization_config"] = quantization_config;
  write_json(dir / "config.json", cfg);
  write_raw_safetensors(dir / "model.safetensors", tensors);
}

} // namespace ninfer::test
