// The registry of model families: what config.json model_types ninfer reads, and which family
// each belongs to.
#include "ninfer/checkpoint/model_family.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ninfer/support/error.hpp"

namespace ninfer {
namespace {

// Filled while ninfer_core's static objects are constructed (core/models/model_families.cpp),
// so it is complete before anything reads a config.
std::vector<const ModelFamily*>& registry() {
  static std::vector<const ModelFamily*> families;
  return families;
}

std::vector<std::string> preset_names(const ModelFamily& f) {
  std::vector<std::string> names;
  for (const auto* list : {&f.shape_presets, &f.random_presets})
    for (const auto& p : *list) names.push_back(p.name);
  return names;
}

} // namespace

const ConfigForm& ModelFamily::flat_form() const {
  for (const auto& f : forms)
    if (!f.nested()) return f;
  throw Error(fmt::format("model family {} has no flat config.json form", name));
}

void register_model_family(const ModelFamily& family) {
  family.flat_form();
  if (!family.default_layer_types || family.layer_kinds.empty())
    throw Error(fmt::format("model family {} names no layer kinds or no default layer_types", family.name));
  for (const ModelFamily* other : registry()) {
    for (const auto& form : family.forms)
      for (const auto& taken : other->forms)
        if (form.model_type == taken.model_type)
          throw Error(fmt::format("model families {} and {} both claim model_type '{}'", other->name,
                                  family.name, form.model_type));
    const auto theirs = preset_names(*other);
    for (const auto& name : preset_names(family))
      if (std::find(theirs.begin(), theirs.end(), name) != theirs.end())
        throw Error(fmt::format("model families {} and {} both name a preset '{}'", other->name,
                                family.name, name));
  }
  registry().push_back(&family);
}

const std::vector<const ModelFamily*>& model_families() { return registry(); }

std::string supported_model_types_text() {
  std::string text;
  for (const ModelFamily* f : registry())
    for (const auto& form : f->forms)
      text += fmt::format("{}{} ({})", text.empty() ? "" : ", ", form.model_type, form.architecture);
  return text;
}

FamilyForm model_family_for(std::string_view model_type) {
  for (const ModelFamily* f : registry())
    for (const auto& form : f->forms)
      if (form.model_type == model_type) return {f, &form};
  throw Error(fmt::format("model_type '{}' is not supported; supported model types: {}", model_type,
                          supported_model_types_text()));
}

const ModelFamily& family_of(const ModelConfig& cfg) {
  if (!cfg.family)
    throw Error(fmt::format("{}: the model config names no model family (supported model types: {})",
                            cfg.config_path.empty() ? std::string("model config") : cfg.config_path.string(),
                            supported_model_types_text()));
  return *cfg.family;
}

const char* family_name(const ModelFamily* f) { return f ? f->name.c_str() : "?"; }

const std::vector<std::string>& supported_model_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> t;
    for (const ModelFamily* f : registry())
      for (const auto& form : f->forms) t.push_back(form.model_type);
    return t;
  }();
  return types;
}

} // namespace ninfer
