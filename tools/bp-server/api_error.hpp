// api_error.hpp: a request's failure as an HTTP status and OpenAI's error
// JSON ({"error": {"message", "type", "param", "code"}}), the shape OpenAI
// clients turn into their exception types.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace bp::server {

struct api_error : std::runtime_error {
  api_error(int status_, std::string message, std::string param_ = {}, std::string code_ = {})
      : std::runtime_error(message), status(status_), param(std::move(param_)), code(std::move(code_)) {}
  int status;
  std::string param;  // the offending field, or ""
  std::string code;   // OpenAI's finer code ("context_length_exceeded"), or ""

  nlohmann::json body() const {
    const char *t = status == 401   ? "authentication_error"
                    : status == 503 ? "server_busy"
                    : status >= 500 ? "server_error"
                                    : "invalid_request_error";
    nlohmann::json e = {{"message", what()}, {"type", t}};
    e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
    e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
    return {{"error", e}};
  }
};

}  // namespace bp::server
