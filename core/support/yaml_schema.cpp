#include "ninfer/support/yaml_schema.hpp"

#include <fmt/format.h>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>

#include "ninfer/support/error.hpp"

namespace ninfer {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read {}", p.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Schemas are parsed once per process.
const valijson::Schema& schema_for(const std::filesystem::path& schema_file) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<valijson::Schema>> cache;
  std::lock_guard lock(mu);
  auto& slot = cache[schema_file.string()];
  if (!slot) {
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(read_file(schema_file));
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: not valid JSON: {}", schema_file.string(), e.what()));
    }
    auto schema = std::make_unique<valijson::Schema>();
    valijson::SchemaParser parser;
    valijson::adapters::NlohmannJsonAdapter adapter(doc);
    parser.populateSchema(adapter, *schema);
    slot = std::move(schema);
  }
  return *slot;
}

// YAML scalars carry no type; resolve them the way YAML 1.2's core schema does (quoted
// scalars stay strings) so the JSON Schema sees integers, numbers, booleans and nulls.
// (valijson's own yaml-cpp adapter treats every scalar as a string and does not build with
// Debian 12's valijson, so validation runs on this converted tree.)
nlohmann::json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : n) a.push_back(to_json(e));
      return a;
    }
    case YAML::NodeType::Map: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s; // quoted
  static const std::regex int_re("[-+]?[0-9]+");
  static const std::regex float_re("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (std::regex_match(s, int_re)) {
    try {
      return std::stoll(s);
    } catch (const std::out_of_range&) {
      return s;
    }
  }
  if (std::regex_match(s, float_re)) return std::stod(s);
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s == "null" || s == "Null" || s == "NULL" || s == "~") return nullptr;
  return s;
}

// valijson reports a path like ["<root>", "[devices]", "[3]", "[sm_count]"]. Walk the same
// path through the YAML tree to find the line, and render it as devices[3].sm_count.
std::pair<YAML::Node, std::string> locate(const YAML::Node& root,
                                          const std::vector<std::string>& context) {
  YAML::Node node = root;
  std::string key;
  for (const auto& part : context) {
    if (part.size() < 2 || part.front() != '[' || part.back() != ']') continue;
    std::string k = part.substr(1, part.size() - 2);
    bool index = !k.empty() && k.find_first_not_of("0123456789") == std::string::npos;
    if (index && node.IsSequence()) {
      key += "[" + k + "]";
      YAML::Node next = node[std::stoul(k)];
      if (next) node = next;
    } else {
      key += (key.empty() ? "" : ".") + k;
      if (node.IsMap()) {
        YAML::Node next = node[k];
        if (next) node = next;
      }
    }
  }
  return {node, key.empty() ? "(document)" : key};
}

YAML::Node validate(YAML::Node root, const std::string& origin,
                    const std::filesystem::path& schema_file) {
  const valijson::Schema& schema = schema_for(schema_file);
  valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::ValidationResults results;
  const nlohmann::json doc = to_json(root);
  valijson::adapters::NlohmannJsonAdapter adapter(doc);
  if (validator.validate(schema, adapter, &results)) return root;
  // valijson reports the failing leaf first and then each enclosing constraint; the leaf
  // says the most, so report the deepest error and count the rest.
  valijson::ValidationResults::Error best;
  size_t count = 0;
  valijson::ValidationResults::Error err;
  while (results.popError(err)) {
    if (count++ == 0 || err.context.size() > best.context.size()) best = err;
  }
  auto [node, key] = locate(root, best.context);
  std::string value;
  if (node.IsScalar()) value = fmt::format(" (got '{}')", node.Scalar());
  throw Error(fmt::format("{}: {}: {}{} [schema {}]", where(origin, node), key, best.description,
                          value, schema_file.filename().string()));
}

} // namespace

std::string where(const std::string& origin, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return origin;
  return fmt::format("{}:{}", origin, m.line + 1);
}

YAML::Node parse_validated_yaml(const std::string& text, const std::string& origin,
                                const std::filesystem::path& schema_file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw Error(fmt::format("{}:{}:{}: YAML syntax error: {}", origin, e.mark.line + 1,
                            e.mark.column + 1, e.msg));
  }
  return validate(root, origin, schema_file);
}

YAML::Node load_validated_yaml(const std::filesystem::path& file,
                               const std::filesystem::path& schema_file) {
  if (!std::filesystem::exists(file)) throw Error(fmt::format("{}: file not found", file.string()));
  return parse_validated_yaml(read_file(file), file.string(), schema_file);
}

} // namespace ninfer
