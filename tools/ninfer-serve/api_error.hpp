// An HTTP error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace ninfer::tools {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = {},
           std::string code = {})
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type;
  std::string param; // the request field at fault, if any
  std::string code;

  nlohmann::json body() const {
    using nlohmann::json;
    return json{{"error",
                 {{"message", what()},
                  {"type", type},
                  {"param", param.empty() ? json(nullptr) : json(param)},
                  {"code", code.empty() ? json(nullptr) : json(code)}}}};
  }
};

// A bad request field: 400, naming it.
inline ApiError bad_param(const std::string& param, const std::string& message) {
  return ApiError(400, param + ": " + message, "invalid_request_error", param);
}

} // namespace ninfer::tools
