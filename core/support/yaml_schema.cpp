#include "ninfer/support/yaml_schema.hpp"

#include <fmt/format.h>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "ninfer/support/bounded_file.hpp"
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

// What a YAML document may hold, checked on the parsed tree before anything walks it: yaml-cpp
// shares an aliased node instead of copying it, but every walk (the conversion for the schema,
// the loaders) expands aliases, so 500 bytes of nested aliases would become billions of nodes.
constexpr size_t kMaxNodes = 200'000; // counted with aliases expanded
constexpr int kMaxDepth = 64;

// Where a node sits, as a chain up to the document; rendered ("runtime.max_concurrency",
// "devices[3].name") only for a message, so the walk itself allocates nothing per node.
struct Place {
  const Place* parent;
  const YAML::Node* key; // the map key leading here, or nullptr for a list element
  size_t index;          // the list index, when key is nullptr

  std::string render() const {
    std::string up = parent ? parent->render() : std::string();
    if (key) return up.empty() ? key->Scalar() : up + "." + key->Scalar();
    return fmt::format("{}[{}]", up, index);
  }
};

std::string render(const Place* p) {
  const std::string s = p ? p->render() : std::string();
  return s.empty() ? "(document)" : shortened_value(s, 200);
}

class TreeCheck {
 public:
  explicit TreeCheck(const std::string& origin) : origin_(origin) {}

  void check(const YAML::Node& n, const Place* place, int depth) {
    if (++nodes_ > kMaxNodes)
      throw Error(fmt::format("{}: more than {} nodes once aliases are expanded (the limit); a document this "
                              "large is a mistake or an alias bomb",
                              origin_, kMaxNodes));
    if (depth > kMaxDepth)
      throw Error(fmt::format("{}: {}: nested deeper than {} levels (the limit)", where(origin_, n), render(place),
                              kMaxDepth));
    switch (n.Type()) {
      case YAML::NodeType::Scalar:
        if (n.Scalar().size() > kMaxYamlScalarBytes)
          throw Error(fmt::format("{}: {}: a value of {} characters, longer than the limit of {}", where(origin_, n),
                                  render(place), n.Scalar().size(), kMaxYamlScalarBytes));
        return;
      case YAML::NodeType::Sequence: {
        size_t i = 0;
        for (const auto& e : n) {
          const Place here{place, nullptr, i++};
          check(e, &here, depth + 1);
        }
        return;
      }
      case YAML::NodeType::Map: {
        std::unordered_map<std::string_view, YAML::Mark> seen;
        for (const auto& kv : n) {
          if (!kv.first.IsScalar())
            throw Error(fmt::format("{}: {}: a key must be a plain value, not a {}", where(origin_, kv.first),
                                    render(place),
                                    kv.first.IsMap() ? "mapping" : kv.first.IsSequence() ? "list" : "null"));
          check(kv.first, place, depth + 1);
          const Place here{place, &kv.first, 0};
          // The key's text lives in the document, which outlives this map's walk.
          auto [it, fresh] = seen.emplace(kv.first.Scalar(), kv.first.Mark());
          if (!fresh)
            throw Error(fmt::format("{}: {}: duplicate key (first at line {}); each key may appear once",
                                    where(origin_, kv.first), render(&here), it->second.line + 1));
          check(kv.second, &here, depth + 1);
        }
        return;
      }
      default:
        return;
    }
  }

 private:
  const std::string& origin_;
  size_t nodes_ = 0;
};

// The offset of the first byte that is not part of well-formed UTF-8 (no overlong forms,
// surrogates or code points past U+10FFFF), if any. The validator's string checks decode
// UTF-8 without checking it.
std::optional<size_t> invalid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return i;
    if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return i;
    i += len;
  }
  return std::nullopt;
}

bool digits(const std::string& s, size_t& i) {
  const size_t start = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  return i > start;
}

// YAML 1.2 core schema: [-+]?[0-9]+
bool is_int(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  return digits(s, i) && i == s.size();
}

// YAML 1.2 core schema: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?  (a scan: a
// recursive regex engine overflows the stack on long scalars)
bool is_float(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits(s, i)) return false;
  } else {
    if (!digits(s, i)) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      digits(s, i);
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!digits(s, i)) return false;
  }
  return i == s.size();
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
  const std::string type = yaml_scalar_type(n);
  if (type == "integer") return std::strtoll(s.c_str(), nullptr, 10);
  if (type == "number") return std::strtod(s.c_str(), nullptr);
  if (type == "boolean") return s[0] == 't' || s[0] == 'T';
  if (type == "null") return nullptr;
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
  if (node.IsScalar()) value = fmt::format(" (got '{}')", shortened_value(node.Scalar()));
  throw Error(fmt::format("{}: {}: {}{} [schema {}]", where(origin, node), key, best.description,
                          value, schema_file.filename().string()));
}

} // namespace

std::string yaml_scalar_type(const YAML::Node& n) {
  if (!n.IsScalar()) return n.IsMap() ? "object" : n.IsSequence() ? "array" : "null";
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return "string"; // quoted
  if (is_int(s)) {
    errno = 0;
    std::strtoll(s.c_str(), nullptr, 10);
    return errno == ERANGE ? "string" : "integer"; // too large: the schema says what it wanted
  }
  if (is_float(s))  // a double's overflow stays text; an underflow is the nearest double
    return std::isinf(std::strtod(s.c_str(), nullptr)) ? "string" : "number";
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE")
    return "boolean";
  if (s == "null" || s == "Null" || s == "NULL" || s == "~") return "null";
  return "string";
}

std::string shortened_value(const std::string& s, size_t limit) {
  if (s.size() <= limit) return s;
  return fmt::format("{}... ({} characters)", s.substr(0, limit), s.size());
}

std::string where(const std::string& origin, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return origin;
  return fmt::format("{}:{}", origin, m.line + 1);
}

YAML::Node parse_yaml(const std::string& text, const std::string& origin) {
  if (auto at = invalid_utf8(text)) {
    const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(*at), '\n'));
    throw Error(fmt::format("{}:{}: not valid UTF-8 (byte {} of the file); save it as UTF-8", origin, line, *at));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw Error(fmt::format("{}:{}:{}: YAML syntax error: {}", origin, e.mark.line + 1,
                            e.mark.column + 1, e.msg));
  }
  TreeCheck(origin).check(root, nullptr, 0);
  return root;
}

std::string read_yaml_file(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) throw Error(fmt::format("{}: file not found", file.string()));
  return read_bounded_file(file, kMaxYamlFileBytes, "a YAML file");
}

YAML::Node parse_validated_yaml(const std::string& text, const std::string& origin,
                                const std::filesystem::path& schema_file) {
  return validate(parse_yaml(text, origin), origin, schema_file);
}

YAML::Node load_validated_yaml(const std::filesystem::path& file,
                               const std::filesystem::path& schema_file) {
  return parse_validated_yaml(read_yaml_file(file), file.string(), schema_file);
}

} // namespace ninfer
