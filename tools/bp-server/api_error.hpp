// api_error.hpp: a request's failure as an HTTP status and OpenAI's error
// JSON ({"error": {"message", "type", "param", "code"}}), the shape OpenAI
// clients turn into their exception types.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace bp::server {

struct api_error : std::runtime_error {
  api_error(int status_, std::string message, std::string param_ = {}, std::string type_ = {})
      : std::runtime_error(message), status(status_), param(std::move(param_)), type(std::move(type_)) {}
  int status;
  std::string param;  // the offending field, or ""
  std::string type;   // "" = by status

  nlohmann::json body() const {
    std::string t = type;
    if (t.empty())
      t = status == 401   ? "authentication_error"
          : status == 503 ? "server_busy"
          : status >= 500 ? "server_error"
                          : "invalid_request_error";
    nlohmann::json e = {{"message", what()}, {"type", t}, {"code", nullptr}};
    e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
    return {{"error", e}};
  }
};

}  // namespace bp::server
