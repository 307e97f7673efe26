#include "ninfer/checkpoint/safetensors_writer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <set>

#include "ninfer/support/error.hpp"

namespace ninfer {

size_t TensorSpec::bytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

void write_safetensors(const std::filesystem::path& file, const std::vector<TensorSpec>& specs,
                       const TensorFiller& fill, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  size_t offset = 0;
  for (const auto& s : specs) {
    if (!seen.insert(s.name).second) throw Error(fmt::format("{}: tensor {} written twice", file.string(), s.name));
    header[s.name] = {{"dtype", dtype_name(s.dtype)}, {"shape", s.shape}, {"data_offsets", {offset, offset + s.bytes()}}};
    offset += s.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(fmt::format("cannot create {}", file.string()));
  const uint64_t len = text.size();
  char len_bytes[8];
  std::memcpy(len_bytes, &len, 8); // little-endian host (static_assert in dtype.cpp)
  out.write(len_bytes, 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<std::byte> buf;
  for (size_t i = 0; i < specs.size(); ++i) {
    buf.assign(specs[i].bytes(), std::byte{0});
    fill(i, std::span<std::byte>(buf));
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    if (!out) break;
  }
  out.flush();
  if (!out) throw Error(fmt::format("writing {} failed (disk full?)", file.string()));
}

} // namespace ninfer
