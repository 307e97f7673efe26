#include "raw_safetensors.hpp"

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "test_support.hpp"

namespace ninfer::test {

std::string read_file_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("test: cannot read " + file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_bytes(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("test: cannot write " + file.string());
}

nlohmann::json read_json(const std::filesystem::path& file) { return nlohmann::json::parse(read_file_bytes(file)); }

void write_json(const std::filesystem::path& file, const nlohmann::json& j) { write_file_bytes(file, j.dump(2)); }

RawTensors read_raw_safetensors(const std::filesystem::path& file) {
  const std::string all = read_file_bytes(file);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(all[static_cast<size_t>(i)]);
  const auto header = nlohmann::json::parse(all.substr(8, n));
  RawTensors out;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    RawTensor t;
    t.dtype = e["dtype"].get<std::string>();
    t.shape = e["shape"].get<std::vector<int64_t>>();
    const auto b = e["data_offsets"][0].get<size_t>(), en = e["data_offsets"][1].get<size_t>();
    t.bytes = all.substr(8 + n + b, en - b);
    out[name] = std::move(t);
  }
  return out;
}

void write_raw_file(const std::filesystem::path& file, const std::string& header, const std::string& data,
                    int64_t header_len) {
  const uint64_t len = header_len < 0 ? header.size() : static_cast<uint64_t>(header_len);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xff);
  write_file_bytes(file, out + header + data);
}

void write_raw_safetensors(const std::filesystem::path& file, const RawTensors& tensors,
                           const std::vector<std::string>& order) {
  std::vector<std::string> names = order;
  if (names.empty())
    for (const auto& [n, _] : tensors) names.push_back(n);
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const auto& n : names) {
    const RawTensor& t = tensors.at(n);
    header[n] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  write_raw_file(file, header.dump(), data);
}

void copy_fixture_config(const std::string& fixture, const std::filesystem::path& dir) {
  const auto src = fixtures_dir() / fixture;
  std::filesystem::copy_file(src / "config.json", dir / "config.json");
  if (std::filesystem::exists(src / "generation_config.json"))
    std::filesystem::copy_file(src / "generation_config.json", dir / "generation_config.json");
}

} // namespace ninfer::test
