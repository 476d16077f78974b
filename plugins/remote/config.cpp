// config.cpp: the client's settings from the environment (BP_REMOTE*),
// read once when the devices are first listed or asked for.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "protocol.hpp"
#include "remote.hpp"

namespace bp::remote_plugin {
namespace {

bool read_file(const std::string &path, std::string *out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return !in.bad();
}

// "host:port" with a numeric port; IPv6 hosts in brackets ("[::1]:7070").
bool valid_address(const std::string &a) {
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size()) return false;
  for (size_t i = colon + 1; i < a.size(); ++i)
    if (a[i] < '0' || a[i] > '9') return false;
  return std::strtol(a.c_str() + colon + 1, nullptr, 10) <= 65535;
}

bp_status read_positive(const char *var, int64_t lo, int64_t hi, int64_t *out, bp_error *err) {
  const char *v = std::getenv(var);
  if (!v || !*v) return BP_OK;
  char *end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  if (errno || *end || n < lo || n > hi)
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s=%s; use a whole number in %lld..%lld", var, v,
                         static_cast<long long>(lo), static_cast<long long>(hi));
  *out = n;
  return BP_OK;
}

bp_status read_pem(const char *var, std::string *path, std::string *out, bp_error *err) {
  const char *v = std::getenv(var);
  if (!v || !*v) return BP_OK;
  *path = v;
  if (!read_file(v, out) || out->empty())
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT, "%s=%s cannot be read (%s); point it at a PEM file", var, v,
                         errno ? std::strerror(errno) : "empty file");
  return BP_OK;
}

}  // namespace

bp_status read_config(client_config *out, bp_error *err) {
  client_config c;
  if (const char *list = std::getenv("BP_REMOTE"); list && *list) {
    std::string item;
    std::istringstream ss(list);
    while (std::getline(ss, item, ',')) {
      while (!item.empty() && item.front() == ' ') item.erase(item.begin());
      while (!item.empty() && item.back() == ' ') item.pop_back();
      if (item.empty()) continue;
      if (!valid_address(item))
        return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                             "BP_REMOTE names '%s', which is not host:port; write BP_REMOTE=host:port[,host:port...]",
                             item.c_str());
      c.servers.push_back(item);
    }
  }
  if (const char *tf = std::getenv("BP_REMOTE_TOKEN_FILE"); tf && *tf) {
    c.token_file = tf;
    if (!read_file(tf, &c.token))
      return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                           "BP_REMOTE_TOKEN_FILE=%s cannot be read (%s); point it at the file holding bp-serve's token",
                           tf, std::strerror(errno));
    // Surrounding white space is not part of the token (as bp-serve reads it).
    const char *space = " \t\r\n\v\f";
    const size_t first = c.token.find_first_not_of(space);
    c.token =
        first == std::string::npos ? std::string() : c.token.substr(first, c.token.find_last_not_of(space) - first + 1);
  }
  if (bp_status s = read_pem("BP_REMOTE_TLS_CA", &c.tls_ca_file, &c.tls_ca, err); s != BP_OK) return s;
  std::string unused;
  if (bp_status s = read_pem("BP_REMOTE_TLS_CERT", &unused, &c.tls_cert, err); s != BP_OK) return s;
  if (bp_status s = read_pem("BP_REMOTE_TLS_KEY", &unused, &c.tls_key, err); s != BP_OK) return s;
  if (c.tls_cert.empty() != c.tls_key.empty())
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                         "a client certificate needs both BP_REMOTE_TLS_CERT and BP_REMOTE_TLS_KEY");
  if (!c.tls_cert.empty() && c.tls_ca.empty())
    return bp_error_setf(err, BP_ERR_INVALID_ARGUMENT,
                         "BP_REMOTE_TLS_CERT is set but BP_REMOTE_TLS_CA is not; TLS needs the server's CA");
  if (bp_status s = read_positive("BP_REMOTE_TIMEOUT_MS", 1, 3600000, &c.timeout_ms, err); s != BP_OK) return s;
  int64_t chunk = static_cast<int64_t>(c.chunk_bytes);
  if (bp_status s = read_positive("BP_REMOTE_CHUNK_BYTES", 4096, static_cast<int64_t>(bp::remote::k_max_chunk_bytes),
                                  &chunk, err);
      s != BP_OK)
    return s;
  c.chunk_bytes = static_cast<size_t>(chunk);
  c.connect_timeout_ms = c.timeout_ms < 3000 ? c.timeout_ms : 3000;
  *out = std::move(c);
  return BP_OK;
}

}  // namespace bp::remote_plugin
