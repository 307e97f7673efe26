// SafetensorsFile: the checkpoint module's mapper and header parser applied to a single file.
#include "ninfer/checkpoint/safetensors_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "mapped_file.hpp"
#include "ninfer/support/error.hpp"
#include "safetensors_header.hpp"

namespace ninfer {

struct SafetensorsFile::Impl {
  checkpoint_detail::MappedFile map;
  std::map<std::string, TensorView> tensors;
  explicit Impl(const std::filesystem::path& file) : map(file) {}
};

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& file) {
  auto impl = std::make_unique<Impl>(file);
  auto contents = checkpoint_detail::parse_safetensors(impl->map);
  for (auto& t : contents.tensors) {
    std::string name = t.name;
    impl->tensors.emplace(std::move(name), std::move(t));
  }
  return SafetensorsFile(std::move(impl));
}

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

const std::filesystem::path& SafetensorsFile::path() const { return impl_->map.path(); }

bool SafetensorsFile::has(const std::string& name) const { return impl_->tensors.count(name) != 0; }

const TensorView& SafetensorsFile::tensor(const std::string& name) const {
  auto it = impl_->tensors.find(name);
  if (it == impl_->tensors.end())
    throw Error(fmt::format("{} has no tensor named '{}' ({} tensors in the file)", path().string(), name,
                            impl_->tensors.size()));
  return it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [n, t] : impl_->tensors) out.push_back(n);
  return out;
}

} // namespace ninfer
