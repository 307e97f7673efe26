// Checkpoint::open: config.json, then one safetensors file or the shards named by
// model.safetensors.index.json, each memory-mapped and its header validated.
#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "mapped_file.hpp"
#include "ninfer/checkpoint/json_fields.hpp"
#include "ninfer/checkpoint/progress.hpp"
#include "ninfer/support/error.hpp"
#include "safetensors_header.hpp"

namespace ninfer {

using checkpoint_detail::MappedFile;
using checkpoint_detail::UnreadableTensor;

struct Checkpoint::Impl {
  std::filesystem::path dir;
  ModelConfig config;
  std::vector<MappedFile> maps; // TensorView::data points into these
  std::vector<std::filesystem::path> files;
  std::unordered_map<std::string, TensorView> tensors;
  std::unordered_map<std::string, UnreadableTensor> unreadable;
  size_t data_bytes = 0;
  std::optional<uint64_t> synthetic_seed;
  std::map<std::string, SyntheticQuant> synthetic_quant;

  void open_sharded(const std::filesystem::path& index);
  void reconcile_prefix();

  bool contains(const std::string& name) const { return tensors.count(name) || unreadable.count(name); }

  void add_file(const std::filesystem::path& path) {
    maps.emplace_back(path);
    files.push_back(path);
    auto contents = checkpoint_detail::parse_safetensors(maps.back());
    data_bytes += contents.data_bytes;
    for (auto& t : contents.tensors) {
      if (contains(t.name)) duplicate(t.name, path);
      std::string name = t.name;
      tensors.emplace(std::move(name), std::move(t));
    }
    for (auto& u : contents.unreadable) {
      if (contains(u.name)) duplicate(u.name, path);
      std::string name = u.name;
      unreadable.emplace(std::move(name), std::move(u));
    }
  }

  [[noreturn]] void duplicate(const std::string& name, const std::filesystem::path& path) const {
    auto it = tensors.find(name);
    const auto first = it != tensors.end() ? it->second.file : unreadable.at(name).file;
    throw Error(fmt::format("tensor {} appears in both {} and {}; the checkpoint's shards are inconsistent", name,
                            first.string(), path.string()));
  }

  std::string files_list() const {
    std::vector<std::string> n;
    for (size_t i = 0; i < files.size() && i < 3; ++i) n.push_back(files[i].filename().string());
    std::string s = fmt::format("{}", fmt::join(n, ", "));
    if (files.size() > 3) s += fmt::format(" and {} more", files.size() - 3);
    return fmt::format("{} (in {})", s, dir.string());
  }
};

namespace {

// A shard must be a file of the checkpoint folder itself: a name with a separator, "." or
// ".." (or an absolute path) would map weights from somewhere else.
bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

// weight_map from model.safetensors.index.json: tensor -> shard file name.
std::vector<std::pair<std::string, std::string>> read_index(const std::filesystem::path& index) {
  const ConfigJson doc = read_json_file(index, kMaxIndexJsonBytes);
  const JsonFields top(doc, index);
  const auto& map = doc.find("weight_map");
  if (map == doc.end() || !map->is_object())
    top.fail("weight_map", "is missing or not an object mapping tensor names to shard files");
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string()) top.fail("weight_map", fmt::format("entry {} is not a file name", name));
    const std::string shard = file.get<std::string>();
    if (!plain_file_name(shard))
      top.fail("weight_map", fmt::format("puts {} in '{}', which is not a plain file name; shards are files of the "
                                         "checkpoint folder itself (no '/', '.' or '..')",
                                         name, shard.size() > 200 ? shard.substr(0, 200) + "..." : shard));
    out.emplace_back(name, shard);
  }
  return out;
}

} // namespace

void Checkpoint::Impl::open_sharded(const std::filesystem::path& index) {
  Impl& impl = *this;
  const auto weight_map = read_index(index);
  std::vector<std::string> shard_names; // each shard once, opened in name order
  std::map<std::string, std::string> first_tensor;
  for (const auto& [tensor, file] : weight_map)
    if (first_tensor.emplace(file, tensor).second) shard_names.push_back(file);
  std::sort(shard_names.begin(), shard_names.end());

  ProgressLine progress("mapping checkpoint shards", static_cast<int64_t>(shard_names.size()));
  for (size_t i = 0; i < shard_names.size(); ++i) {
    const auto path = impl.dir / shard_names[i];
    if (!std::filesystem::exists(path))
      throw Error(fmt::format("{}: weight_map puts {} in {}, which is not in {}; the download is incomplete",
                              index.string(), first_tensor[shard_names[i]], shard_names[i], impl.dir.string()));
    progress.update(static_cast<int64_t>(i), shard_names[i]);
    impl.add_file(path);
  }
  progress.update(static_cast<int64_t>(shard_names.size()), "done");
  // The index and the shards must agree, or a loader would read the wrong bytes.
  for (const auto& [tensor, file] : weight_map) {
    auto it = impl.tensors.find(tensor);
    const std::filesystem::path actual =
        it != impl.tensors.end() ? it->second.file
                                 : (impl.unreadable.count(tensor) ? impl.unreadable.at(tensor).file : "");
    if (actual.empty() || actual.filename() != std::filesystem::path(file).filename())
      throw Error(fmt::format("{}: weight_map puts tensor {} in {}, but {}", index.string(), tensor, file,
                              actual.empty() ? std::string("no shard contains it")
                                             : "it is in " + actual.filename().string()));
  }
}

// A config may say "model." while the weights sit under "model.language_model." (a text-only
// export of a multimodal checkpoint) or the reverse; follow the tensors.
void Checkpoint::Impl::reconcile_prefix() {
  Impl& impl = *this;
  auto& cfg = impl.config;
  if (impl.tensors.count(cfg.weight_prefix + "embed_tokens.weight")) return;
  for (const char* alt : {"model.", "model.language_model."}) {
    if (alt != cfg.weight_prefix && impl.tensors.count(std::string(alt) + "embed_tokens.weight")) {
      spdlog::debug("{}: config implies text weights under '{}', the tensors are under '{}'; using the tensors'",
                    impl.dir.string(), cfg.weight_prefix, alt);
      cfg.weight_prefix = alt;
      return;
    }
  }
}

Checkpoint Checkpoint::open(const std::filesystem::path& dir) {
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->config = load_model_config(dir);
  const auto index = dir / "model.safetensors.index.json";
  const auto single = dir / "model.safetensors";
  if (std::filesystem::exists(index)) {
    impl->open_sharded(index);
  } else if (std::filesystem::exists(single)) {
    ProgressLine progress("mapping checkpoint", 1);
    progress.update(0, single.filename().string());
    impl->add_file(single);
  } else {
    throw Error(fmt::format("{}: no model.safetensors or model.safetensors.index.json; the folder has a "
                            "config.json but no weights (an incomplete download?)",
                            dir.string()));
  }
  impl->reconcile_prefix();
  spdlog::debug("checkpoint {}: {} tensors in {} file(s), {:.1f} MB", dir.string(), impl->tensors.size(),
                impl->files.size(), impl->data_bytes / 1e6);
  return Checkpoint(std::move(impl));
}

Checkpoint Checkpoint::synthetic(const ModelConfig& config, DType dtype, uint64_t seed,
                                 std::map<std::string, SyntheticQuant> quantized) {
  auto impl = std::make_unique<Impl>();
  impl->dir = "<synthetic>";
  impl->config = config;
  impl->synthetic_seed = seed;
  // The model's tensors and, when the config has one, its MTP head's.
  std::vector<ExpectedTensor> expected = expected_tensors(config);
  for (ExpectedTensor& e : mtp_tensors(config)) expected.push_back(std::move(e));
  for (const auto& [name, q] : quantized) {
    const auto it = std::find_if(expected.begin(), expected.end(), [&](const ExpectedTensor& e) { return e.name == name; });
    if (it == expected.end() || it->role != TensorRole::Linear)
      throw Error(fmt::format("synthetic checkpoint: {} is not a linear weight of this model, so it cannot be quantized",
                              name));
    if (q.group_size < 1) throw Error(fmt::format("synthetic checkpoint: {}: group size {} < 1", name, q.group_size));
  }
  impl->synthetic_quant = std::move(quantized);
  for (const ExpectedTensor& e : expected) {
    TensorView t;
    t.name = e.name;
    // Matrices in the asked dtype; norm, conv and GDN parameters are float32 in real checkpoints too.
    t.dtype = e.role == TensorRole::Embedding || e.role == TensorRole::Linear ? dtype : DType::F32;
    t.shape = e.shape;
    t.bytes = static_cast<size_t>(t.numel()) * dtype_size(t.dtype);
    t.file = impl->dir;
    impl->data_bytes += t.bytes;
    impl->tensors.emplace(e.name, std::move(t));
  }
  return Checkpoint(std::move(impl));
}

std::optional<uint64_t> Checkpoint::synthetic_seed() const { return impl_->synthetic_seed; }

const SyntheticQuant* Checkpoint::synthetic_quant(const std::string& name) const {
  const auto it = impl_->synthetic_quant.find(name);
  return it == impl_->synthetic_quant.end() ? nullptr : &it->second;
}

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

const std::filesystem::path& Checkpoint::dir() const { return impl_->dir; }
const ModelConfig& Checkpoint::config() const { return impl_->config; }
const std::vector<std::filesystem::path>& Checkpoint::files() const { return impl_->files; }
size_t Checkpoint::data_bytes() const { return impl_->data_bytes; }

bool Checkpoint::has(const std::string& name) const { return impl_->tensors.count(name) > 0; }

bool Checkpoint::is_auxiliary(const std::string& name) {
  return name.rfind("model.visual.", 0) == 0 || name.rfind("mtp.", 0) == 0;
}

const TensorView& Checkpoint::tensor(const std::string& name) const {
  auto it = impl_->tensors.find(name);
  if (it != impl_->tensors.end()) return it->second;
  if (auto u = impl_->unreadable.find(name); u != impl_->unreadable.end())
    throw Error(fmt::format("{}: tensor {} has dtype {}, which ninfer does not read (supported: {})",
                            u->second.file.string(), name, u->second.dtype, readable_dtypes()));
  throw Error(fmt::format("tensor {} is missing from {}; text weights are expected under '{}' (from {}); the "
                          "checkpoint is incomplete or does not match its config.json",
                          name, impl_->files_list(), impl_->config.weight_prefix,
                          impl_->config.config_path.filename().string()));
}

const TensorView& Checkpoint::require(const std::string& name, const std::vector<int64_t>& expected_shape) const {
  return require(name, expected_shape, "config.json");
}

const TensorView& Checkpoint::require(const std::string& name, const std::vector<int64_t>& expected_shape,
                                      const std::string& origin) const {
  const TensorView& t = tensor(name);
  if (t.shape != expected_shape)
    throw Error(fmt::format("{}: tensor {} has shape {} but {} gives {}; the weights do not match config.json "
                            "(a config from another model size?)",
                            t.file.string(), name, shape_string(t.shape), origin, shape_string(expected_shape)));
  return t;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(impl_->tensors.size() + impl_->unreadable.size());
  for (const auto& [n, _] : impl_->tensors) out.push_back(n);
  for (const auto& [n, _] : impl_->unreadable) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace ninfer
