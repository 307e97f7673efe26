#include "module_tensors.hpp"

namespace ninfer::quantize_detail {

namespace {

OutputTensor tensor(std::string name, DType dtype, std::vector<int64_t> shape, size_t unit) {
  size_t bytes = dtype_size(dtype);
  for (int64_t d : shape) bytes *= static_cast<size_t>(d);
  return OutputTensor{std::move(name), dtype_name(dtype), std::move(shape), bytes, unit};
}

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)); // little-endian host
}

std::string scales_of(const std::vector<float>& v, DType d) {
  std::string s;
  s.reserve(v.size() * dtype_size(d));
  for (float x : v) append_scalar(s, x, d);
  return s;
}

} // namespace

std::vector<OutputTensor> module_tensors(const PlannedModule& m, const QuantizePlan& plan, size_t unit) {
  const int64_t per = 32 / m.bits, G = m.cols / m.group;
  std::vector<OutputTensor> out;
  if (plan.format == QuantFormat::CompressedTensors) {
    out.push_back(tensor(m.module + ".weight_packed", DType::I32, {m.rows, m.cols / per}, unit));
    out.push_back(tensor(m.module + ".weight_scale", m.scale_dtype, {m.rows, G}, unit));
    out.push_back(tensor(m.module + ".weight_shape", DType::I64, {2}, unit));
    if (!m.symmetric) out.push_back(tensor(m.module + ".weight_zero_point", DType::I32, {(m.rows + per - 1) / per, G}, unit));
    if (plan.actorder) out.push_back(tensor(m.module + ".weight_g_idx", DType::I32, {m.cols}, unit));
    return out;
  }
  out.push_back(tensor(m.module + ".qweight", DType::I32, {m.cols / per, m.rows}, unit));
  out.push_back(tensor(m.module + ".qzeros", DType::I32, {G, m.rows / per}, unit));
  out.push_back(tensor(m.module + ".scales", m.scale_dtype, {G, m.rows}, unit));
  out.push_back(tensor(m.module + ".g_idx", DType::I32, {m.cols}, unit));
  return out;
}

std::vector<std::string> module_tensor_bytes(const QuantizedWeights& q, const PlannedModule& m,
                                             const QuantizePlan& plan) {
  std::vector<std::string> parts;
  if (plan.format == QuantFormat::CompressedTensors) {
    parts.push_back(bytes_of(pack_compressed_tensors(q)));
    parts.push_back(scales_of(q.scales, m.scale_dtype));
    parts.push_back(bytes_of(std::vector<int64_t>{m.rows, m.cols}));
    if (!m.symmetric) parts.push_back(bytes_of(pack_compressed_tensors_zeros(q)));
    if (plan.actorder) parts.push_back(bytes_of(gptq_g_idx(q)));
    return parts;
  }
  parts.push_back(bytes_of(pack_gptq_qweight(q)));
  parts.push_back(bytes_of(gptq_qzeros(q)));
  parts.push_back(scales_of(gptq_scales(q), m.scale_dtype));
  parts.push_back(bytes_of(gptq_g_idx(q)));
  return parts;
}

} // namespace ninfer::quantize_detail
