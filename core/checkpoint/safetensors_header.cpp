#include "safetensors_header.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include "ninfer/checkpoint/json_fields.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::checkpoint_detail {
namespace {

// The safetensors format caps the header at 100 MB; a larger length is a damaged file.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

std::optional<DType> parse_dtype(const std::string& s) {
  if (s == "F32") return DType::F32;
  if (s == "BF16") return DType::BF16;
  if (s == "F16") return DType::F16;
  if (s == "I32") return DType::I32;
  if (s == "I64") return DType::I64;
  if (s == "F8_E4M3") return DType::F8_E4M3;
  return std::nullopt;
}

class HeaderParser {
 public:
  HeaderParser(const unsigned char* data, size_t size, const std::filesystem::path& path)
      : data_(data), size_(size), path_(path) {}

  SafetensorsContents parse() {
    if (size_ < 8)
      corrupt(fmt::format("{} bytes, shorter than the 8-byte header length that starts every safetensors file",
                          size_));
    uint64_t header_len;
    std::memcpy(&header_len, data_, 8);
    if (header_len > size_ - 8)
      corrupt(fmt::format("header length {} runs past the end of the file ({} bytes)", header_len, size_));
    if (header_len > kMaxHeaderBytes)
      corrupt(fmt::format("header length {} is over the format's 100 MB limit", header_len));
    data_begin_ = 8 + header_len;
    data_size_ = size_ - data_begin_;

    const auto* text = reinterpret_cast<const char*>(data_ + 8);
    if (auto at = json_too_deep(text, header_len, kMaxJsonDepth))
      corrupt(fmt::format("the header is nested deeper than {} levels (at byte {})", kMaxJsonDepth, 8 + *at));
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(data_ + 8, data_ + data_begin_);
    } catch (const nlohmann::json::exception& e) {
      corrupt(fmt::format("the header is not valid JSON ({})", e.what()));
    }
    if (!header.is_object()) corrupt("the header is not a JSON object");

    SafetensorsContents out;
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      read_entry(name, entry, out);
    }
    check_overlaps(out);
    out.data_bytes = data_size_;
    return out;
  }

 private:
  [[noreturn]] void corrupt(const std::string& what) const {
    throw Error(fmt::format("truncated or corrupt file {}: {}", path_.string(), what));
  }
  [[noreturn]] void corrupt_tensor(const std::string& name, const std::string& what) const {
    corrupt(fmt::format("tensor {}: {}", name.size() > 200 ? name.substr(0, 200) + "..." : name, what));
  }

  std::vector<int64_t> read_shape(const std::string& name, const nlohmann::json& entry) const {
    auto it = entry.find("shape");
    if (it == entry.end() || !it->is_array()) corrupt_tensor(name, "header entry has no 'shape' list");
    std::vector<int64_t> shape;
    for (const auto& d : *it) {
      if (!d.is_number_unsigned()) corrupt_tensor(name, fmt::format("shape element {} is not a size", shown(d)));
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        corrupt_tensor(name, fmt::format("shape element {} is too large", v));
      shape.push_back(static_cast<int64_t>(v));
    }
    return shape;
  }

  // numel * element size, or nullopt on overflow (which no real file can hold).
  static std::optional<uint64_t> byte_count(const std::vector<int64_t>& shape, uint64_t elem) {
    uint64_t n = elem;
    for (int64_t d : shape) {
      const auto u = static_cast<uint64_t>(d);
      if (u != 0 && n > std::numeric_limits<uint64_t>::max() / u) return std::nullopt;
      n *= u;
    }
    return n;
  }

  void read_entry(const std::string& name, const nlohmann::json& entry, SafetensorsContents& out) {
    if (!entry.is_object()) corrupt_tensor(name, "header entry is not an object");
    auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string()) corrupt_tensor(name, "header entry has no 'dtype' string");
    const std::vector<int64_t> shape = read_shape(name, entry);
    auto off = entry.find("data_offsets");
    if (off == entry.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      corrupt_tensor(name, "header entry has no 'data_offsets' [begin, end] pair");
    const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (begin > end) corrupt_tensor(name, fmt::format("data_offsets [{}, {}] end before they begin", begin, end));
    if (end > data_size_)
      corrupt_tensor(name, fmt::format("data_offsets [{}, {}] reach past the end of the data section ({} bytes); "
                                       "the file is cut short (an unfinished download?)",
                                       begin, end, data_size_));
    if (end > begin) spans_.push_back({begin, end, name}); // empty tensors own no bytes

    std::string dtype_str = dt->get<std::string>();
    if (dtype_str.size() > 20) dtype_str = dtype_str.substr(0, 20) + "..."; // only ever shown
    const std::optional<DType> dtype = parse_dtype(dtype_str);
    if (!dtype) {
      if (Checkpoint::is_auxiliary(name)) {
        out.unreadable.push_back({name, dtype_str, path_});
        return;
      }
      throw Error(fmt::format("{}: tensor {} has dtype {}, which ninfer does not read (supported: {}); convert "
                              "the checkpoint, e.g. to bfloat16",
                              path_.string(), name.size() > 200 ? name.substr(0, 200) + "..." : name, dtype_str,
                              readable_dtypes()));
    }
    const auto want = byte_count(shape, dtype_size(*dtype));
    if (!want || *want != end - begin)
      corrupt_tensor(name, fmt::format("shape {} of {} needs {} bytes but data_offsets [{}, {}] hold {}",
                                       shape_string(shape), dtype_name(*dtype),
                                       want ? fmt::to_string(*want) : std::string("more than 2^64"), begin, end,
                                       end - begin));
    TensorView v;
    v.name = name;
    v.dtype = *dtype;
    v.shape = shape;
    v.data = data_ + data_begin_ + begin;
    v.bytes = static_cast<size_t>(end - begin);
    v.file = path_;
    out.tensors.push_back(std::move(v));
  }

  // Two tensors sharing bytes would alias silently; real writers never produce that.
  void check_overlaps(const SafetensorsContents&) {
    std::sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < spans_.size(); ++i)
      if (spans_[i].begin < spans_[i - 1].end)
        corrupt(fmt::format("tensors {} and {} overlap in the data section", spans_[i - 1].name, spans_[i].name));
  }

  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  const unsigned char* data_;
  size_t size_;
  const std::filesystem::path& path_;
  uint64_t data_begin_ = 0, data_size_ = 0;
  std::vector<Span> spans_;
};

} // namespace

SafetensorsContents parse_safetensors(const unsigned char* data, size_t size, const std::filesystem::path& path) {
  return HeaderParser(data, size, path).parse();
}

SafetensorsContents parse_safetensors(const MappedFile& file) {
  return parse_safetensors(file.data(), file.size(), file.path());
}

} // namespace ninfer::checkpoint_detail
