// Which modules of a checkpoint are quantized, and the reader of their layout
// (quant_formats/): the tensors present decide, the config must agree.
#include "ninfer/checkpoint/quantized_tensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ninfer/support/error.hpp"
#include "quant_formats/formats.hpp"
#include "quant_formats/packed.hpp"

namespace ninfer {

const char* quant_codes_name(QuantCodes c) {
  switch (c) {
    case QuantCodes::Int4: return "int4";
    case QuantCodes::Int8: return "int8";
    case QuantCodes::Fp8E4M3: return "fp8_e4m3";
  }
  return "?";
}

namespace {

struct Layout {
  QuantMethod method;
  const char* marker; // the tensor whose presence says the module is packed this way
  std::vector<const char*> tensors;
};

// GPTQ and AWQ share the marker (qweight): the config's quant_method tells them apart.
const Layout kLayouts[] = {
    {QuantMethod::Gptq, "qweight", {"qweight", "qzeros", "scales", "g_idx"}},
    {QuantMethod::Awq, "qweight", {"qweight", "qzeros", "scales"}},
    {QuantMethod::CompressedTensors, "weight_packed",
     {"weight_packed", "weight_scale", "weight_shape", "weight_zero_point", "weight_g_idx"}},
    {QuantMethod::Fp8Block, "weight_scale_inv", {"weight", "weight_scale_inv"}},
};

const Layout& layout_of(QuantMethod m) {
  for (const auto& l : kLayouts)
    if (l.method == m) return l;
  return kLayouts[0];
}

// The packed tensor that marks `module` as quantized, if any ("" when none).
std::string packed_marker(const Checkpoint& ck, const std::string& module) {
  for (const char* marker : {"qweight", "weight_packed", "weight_scale_inv"})
    if (ck.has(module + "." + marker)) return module + "." + marker;
  if (ck.has(module + ".weight") && ck.tensor(module + ".weight").dtype == DType::F8_E4M3) return module + ".weight";
  return "";
}

// The quant_method a marker implies, for messages.
const char* marker_format(const std::string& marker) {
  if (marker.ends_with(".qweight")) return "gptq or awq";
  if (marker.ends_with(".weight_packed")) return "compressed-tensors";
  return "fp8";
}

bool marker_fits(const std::string& marker, QuantMethod m) {
  const std::string want = layout_of(m).marker;
  return marker.ends_with("." + want) || (m == QuantMethod::Fp8Block && marker.ends_with(".weight"));
}

} // namespace

std::optional<QuantizedModule> find_quantized(const Checkpoint& ck, const std::string& weight_name) {
  if (!weight_name.ends_with(".weight")) return std::nullopt;
  const std::string module = weight_name.substr(0, weight_name.size() - 7);
  const std::string marker = packed_marker(ck, module);
  if (marker.empty()) return std::nullopt;
  const auto& file = ck.tensor(marker).file;
  const auto& cfg = ck.config().quantization;
  if (!cfg)
    throw Error(fmt::format("{}: module {} holds the packed tensor {} ({} layout), but {} has no "
                            "quantization_config to say how to read it",
                            file.string(), module, marker, marker_format(marker),
                            ck.config().config_path.string()));
  if (!marker_fits(marker, cfg->method))
    throw Error(fmt::format("{}: module {} holds {} (a {} layout), but {} says quant_method {}", file.string(), module,
                            marker, marker_format(marker), cfg->where(), quant_method_name(cfg->method)));
  const auto scheme = cfg->scheme_for(module);
  if (!scheme)
    throw Error(fmt::format("{}: module {} holds the packed tensor {}, but {} leaves that module unquantized; the "
                            "config and the weights disagree",
                            file.string(), module, marker, cfg->where()));
  QuantizedModule m;
  m.module = module;
  m.method = cfg->method;
  m.scheme = *scheme;
  m.file = file;
  for (const char* t : layout_of(cfg->method).tensors)
    if (ck.has(module + "." + t)) m.tensors.push_back(module + "." + t);
  switch (cfg->method) {
    case QuantMethod::Gptq: quant_detail::find_gptq(ck, m); break;
    case QuantMethod::Awq: quant_detail::find_awq(ck, m); break;
    case QuantMethod::CompressedTensors: quant_detail::find_compressed_tensors(ck, m); break;
    case QuantMethod::Fp8Block: quant_detail::find_fp8_block(ck, m); break;
  }
  return m;
}

QuantizedMatrix read_quantized(const Checkpoint& ck, const QuantizedModule& m, QuantRead what) {
  switch (m.method) {
    case QuantMethod::Gptq: return quant_detail::read_gptq(ck, m, *ck.config().quantization, what);
    case QuantMethod::Awq: return quant_detail::read_awq(ck, m, what);
    case QuantMethod::CompressedTensors: return quant_detail::read_compressed_tensors(ck, m, what);
    case QuantMethod::Fp8Block: return quant_detail::read_fp8_block(ck, m, what);
  }
  throw Error("internal: unknown quantization method");
}

std::string QuantizedMatrix::label() const {
  if (codes_type == QuantCodes::Fp8E4M3) return fmt::format("{} fp8 g{}", quant_method_name(source.method), group_size);
  return fmt::format("{} {} g{}", quant_method_name(source.method), quant_codes_name(codes_type),
                     group_size == cols ? std::string("channel") : std::to_string(group_size));
}

std::vector<float> QuantizedMatrix::dequantize() const {
  const int64_t G = groups();
  const size_t e = dtype_size(scale_dtype);
  std::vector<float> s(static_cast<size_t>(rows * G));
  TensorView view;
  view.name = source.module + " scales";
  view.dtype = scale_dtype;
  view.shape = {rows * G};
  view.data = scales.data();
  view.bytes = s.size() * e;
  to_f32(view, s.data());
  std::vector<float> w(static_cast<size_t>(rows * cols));
  const int32_t sym = 1 << (bits() - 1);
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < cols; ++k) {
      const int64_t g = g_idx.empty() ? k / group_size : g_idx[static_cast<size_t>(k)];
      const float scale = s[static_cast<size_t>(n * G + g)];
      const uint8_t b = codes[static_cast<size_t>(n * row_bytes() + (codes_type == QuantCodes::Int4 ? k / 2 : k))];
      float v;
      if (codes_type == QuantCodes::Fp8E4M3) {
        v = e4m3_to_f32(b) * scale;
      } else {
        const int32_t u = codes_type == QuantCodes::Int4 ? (b >> (4 * (k % 2))) & 15 : b;
        const int32_t z = zeros.empty() ? sym : zeros[static_cast<size_t>(n * G + g)];
        v = static_cast<float>(u - z) * scale;
      }
      w[static_cast<size_t>(n * cols + k)] = v;
    }
  return w;
}

} // namespace ninfer
