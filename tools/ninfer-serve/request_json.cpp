#include "request_json.hpp"

#include <fmt/format.h>

#include <unordered_map>
#include <vector>

#include "api_error.hpp"
#include "ninfer/sampling/sampling_params.hpp"

namespace ninfer::tools {
namespace {

using json = RequestJson;

// Builds the document from nlohmann's SAX events and tracks where in it the parser is, so that
// a value the parser rejects names its field.
class Builder {
 public:
  explicit Builder(json& root) : root_(root) {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  bool number_float(json::number_float_t v, const json::string_t&) { return put(v); }
  bool string(json::string_t& v) { return put(std::move(v)); }
  bool binary(json::binary_t&) { return false; } // not in JSON text
  bool start_object(std::size_t) {
    json* v = slot();
    *v = json::object();
    stack_.push_back({v, false, 0, {}});
    return true;
  }
  bool key(json::string_t& k) {
    Level& top = stack_.back();
    top.key = k;
    // Appended without the search operator[] would make (ordered_map derives from a vector).
    auto& entries = static_cast<json::object_t::Container&>(*top.value->get_ptr<json::object_t*>());
    entries.emplace_back(std::move(k), nullptr);
    return true;
  }
  bool end_object() {
    dedupe(*stack_.back().value->get_ptr<json::object_t*>());
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    json* v = slot();
    *v = json::array();
    stack_.push_back({v, true, 0, {}});
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    // 406: a number that does not fit (1e999); anything else is malformed JSON.
    if (e.id == 406) throw bad_param(where(), "the number is out of range (it must fit a double)");
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()));
  }

 private:
  struct Level {
    json* value;
    bool array;
    size_t index; // arrays: elements so far
    std::string key;
  };

  // Where the next value goes: the root, the last key's value, or a new array element.
  json* slot() {
    if (stack_.empty()) return &root_;
    Level& top = stack_.back();
    if (!top.array) return &top.value->get_ptr<json::object_t*>()->back().second;
    ++top.index;
    top.value->get_ptr<json::array_t*>()->emplace_back();
    return &top.value->get_ptr<json::array_t*>()->back();
  }
  template <class T>
  bool put(T&& v) {
    *slot() = json(std::forward<T>(v));
    return true;
  }

  static void dedupe(json::object_t& object) {
    auto& entries = static_cast<json::object_t::Container&>(object);
    if (entries.size() < 2) return;
    std::unordered_map<std::string_view, size_t> first;
    bool repeated = false;
    for (size_t i = 0; i < entries.size(); ++i)
      if (!first.emplace(entries[i].first, i).second) repeated = true;
    if (!repeated) return;
    json::object_t::Container kept;
    std::unordered_map<std::string, size_t> at;
    for (auto& [k, v] : entries) {
      auto [it, fresh] = at.emplace(k, kept.size());
      if (fresh) kept.emplace_back(k, std::move(v));
      else kept[it->second].second = std::move(v);
    }
    entries.clear();
    for (auto& [k, v] : kept) entries.emplace_back(k, std::move(v));
  }

  std::string where() const {
    std::string out;
    for (const Level& l : stack_) {
      // An enclosing array already counts the element that holds the failing value.
      if (l.array) out += fmt::format("[{}]", &l == &stack_.back() ? l.index : l.index - 1);
      else out += (out.empty() ? "" : ".") + l.key;
    }
    return out;
  }

  json& root_;
  std::vector<Level> stack_;
};

} // namespace

RequestJson parse_request_body(const std::string& text) {
  json body;
  Builder sax(body);
  json::sax_parse(text, &sax);
  return body;
}

const RequestJson* request_field(const RequestJson& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> request_number(const RequestJson& object, const char* key, double lo, double hi) {
  const json* v = request_field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw bad_param(key, "expected a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) throw bad_param(key, fmt::format("{} is outside [{}, {}]", x, lo, hi));
  return x;
}

void validate_sampling(const SamplingParams& sampling) {
  try {
    sampling.validate();
  } catch (const InvalidSampling& e) {
    throw bad_param(e.field, e.problem);
  }
}

} // namespace ninfer::tools
