#include "template_json.hpp"

namespace ninfer::tools {
namespace {

void write(const nlohmann::ordered_json& v, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += nlohmann::ordered_json(key).dump(-1, ' ', false);
      out += ": ";
      write(item, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ", ";
      write(v[i], out);
    }
    out += ']';
  } else {
    // Scalars: nlohmann escapes strings as json.dumps does with ensure_ascii=False (\", \\,
    // \b \f \n \r \t, other control characters as lower-case \u00XX, nothing else).
    out += v.dump(-1, ' ', false);
  }
}

} // namespace

std::string template_json(const nlohmann::ordered_json& value) {
  std::string out;
  write(value, out);
  return out;
}

} // namespace ninfer::tools
