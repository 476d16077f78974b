// bp-serve: serves this machine's Backplane devices to plugins/remote
// clients over gRPC (remote/proto/remote.proto; docs/remote.md).
//
//   bp-serve --listen HOST:PORT [--devices SPEC] [--token-file F]
//            [--tls-cert F --tls-key F [--tls-client-ca F]]
//            [--max-memory BYTES] [--max-clients N] [--max-handles N]
//            [--max-session-calls N] [--max-threads N] [--max-graph-memory BYTES]
//            [--stream-idle-timeout MS] [--session-grace S] [--insecure]
//
// With port 0 it picks a free port. Once listening it prints
// "bp-serve: listening on HOST:PORT" on stdout. SIGINT or SIGTERM stop it:
// lifelines end, calls still running after a short grace are cancelled
// (clients see UNAVAILABLE) and every session is freed.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include <pthread.h>
#include <unistd.h>
#include <string>
#include <vector>

#include "backplane/backplane.h"
#include "common/cli.hpp"
#include "server.hpp"
#include "token.hpp"

namespace {

namespace srv = bp::remote::server;

bool read_file(const std::string &path, const char *what, std::string *out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    spdlog::error("cannot read the {} file '{}'", what, path);
    return false;
  }
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

bool plugin_is_remote(bp_device *dev) {
  bp_device_info info{};
  info.struct_size = sizeof info;
  if (bp_device_describe(dev, &info) != BP_OK || info.plugin == nullptr) return false;
  const char *name = bp_plugin_name(info.plugin);
  return name && std::string(name) == "remote";
}

// The devices to serve: the ones |spec| (a ';' list) selects, or every
// device but remote ones (a server must not re-export another server).
bool pick_devices(const std::string &spec, std::vector<bp_device *> *out) {
  if (spec.empty()) {
    for (size_t i = 0; i < bp_device_count(); ++i) {
      bp_device *dev = bp_device_get(i);
      if (dev && !plugin_is_remote(dev)) out->push_back(dev);
    }
    return true;
  }
  std::stringstream list(spec);
  std::string one;
  while (std::getline(list, one, ';')) {
    if (one.empty()) continue;
    bp_backend *be = nullptr;
    if (bp_backend_new(one.c_str(), &be) != BP_OK) {
      spdlog::error("--devices: '{}': {}", one, bp_last_error());
      return false;
    }
    bp_device *dev = bp_backend_device(be);
    bp_backend_free(be);
    if (plugin_is_remote(dev)) {
      spdlog::error("--devices: '{}' is a remote device: bp-serve serves local devices only", one);
      return false;
    }
    bool dup = false;
    for (bp_device *d : *out) dup = dup || d == dev;
    if (!dup) out->push_back(dev);
  }
  return true;
}

// A name for this server that stays the same across restarts: the host
// name, the address and the device ids.
std::string server_id(const std::string &listen, const std::vector<bp_device *> &devices) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string all = std::string(host) + "|" + listen;
  for (bp_device *d : devices) {
    bp_device_info info{};
    info.struct_size = sizeof info;
    if (bp_device_describe(d, &info) == BP_OK && info.id) all += std::string("|") + info.id;
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : all) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char out[40];
  std::snprintf(out, sizeof out, "bp-serve-%016llx", static_cast<unsigned long long>(h));
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"bp-serve: serves this machine's Backplane devices to remote clients over gRPC"};
  bp::tools::add_version_flag(app, "bp-serve");
  std::string listen, devices_spec, token_file, tls_cert, tls_key, tls_client_ca;
  uint64_t max_memory = 0;
  size_t max_clients = 16;
  uint32_t max_handles = 4096;
  int session_grace_s = 30;
  uint32_t max_session_calls = 8;
  uint32_t max_threads = 0;
  uint64_t max_graph_memory = uint64_t{256} << 20;
  int stream_idle_ms = 30000;
  bool insecure = false;
  app.add_option("--listen", listen, "HOST:PORT to listen on (port 0: a free port, printed on stdout)")->required();
  app.add_option("--devices", devices_spec, "';'-separated device specs to serve (default: every non-remote device)");
  app.add_option("--token-file", token_file, "file holding the token every client must send (trimmed)");
  app.add_option("--tls-cert", tls_cert, "PEM certificate chain of this server (with --tls-key: TLS)");
  app.add_option("--tls-key", tls_key, "PEM private key of this server");
  app.add_option("--tls-client-ca", tls_client_ca, "PEM CA: clients must present a certificate it signed");
  app.add_option("--max-memory", max_memory, "bytes of buffers each session may hold (0: no limit)");
  app.add_option("--max-clients", max_clients, "sessions open at once (0: no limit)")->capture_default_str();
  app.add_option("--max-handles", max_handles, "backends + buffers + graphs per session")->capture_default_str();
  app.add_option("--session-grace", session_grace_s, "seconds a session may live without a lifeline")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app.add_option("--max-session-calls", max_session_calls,
                 "calls and streams one session may have in flight at once (0: no limit, and no thread pool bound)")
      ->capture_default_str();
  app.add_option("--max-threads", max_threads,
                 "worker threads one session's backends may start on each device (0: this machine's cores)")
      ->capture_default_str();
  app.add_option("--max-graph-memory", max_graph_memory,
                 "bytes of registered graphs each session may hold (0: no limit)")
      ->capture_default_str();
  app.add_option("--stream-idle-timeout", stream_idle_ms,
                 "milliseconds a SetTensor or GetTensor stream may move no data before it is ended (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600000));
  app.add_flag("--insecure", insecure,
               "allow a non-loopback address without both a token and TLS (only on a network you trust)");
  if (auto rc = bp::tools::parse_command_line(app, argc, argv)) return *rc;
  spdlog::set_default_logger(spdlog::stderr_color_mt("bp-serve"));
  spdlog::set_pattern("bp-serve: %l: %v");

  if (tls_cert.empty() != tls_key.empty()) {
    spdlog::error("--tls-cert and --tls-key go together");
    return 2;
  }
  if (!tls_client_ca.empty() && tls_cert.empty()) {
    spdlog::error("--tls-client-ca needs --tls-cert and --tls-key");
    return 2;
  }
  std::string host;
  int port = 0;
  if (!srv::split_host_port(listen, &host, &port)) {
    spdlog::error("--listen '{}' is not HOST:PORT (an IPv6 host in brackets: [::1]:7000)", listen);
    return 2;
  }
  if (!srv::is_loopback_host(host) && (token_file.empty() || tls_cert.empty()) && !insecure) {
    spdlog::error(
        "refusing to listen on {} (not every address it resolves to is loopback) without {}: anyone who reaches it "
        "could use this machine's devices; add "
        "--token-file and --tls-cert/--tls-key, listen on 127.0.0.1 behind a tunnel, or pass --insecure on "
        "a network you trust",
        host, token_file.empty() ? (tls_cert.empty() ? "a token and TLS" : "a token") : "TLS");
    return 2;
  }

  srv::server_config cfg;
  cfg.listen = listen;
  if (!token_file.empty()) {
    std::string why;
    if (!srv::read_token_file(token_file, &cfg.service.token, &why)) {
      spdlog::error("{}", why);
      return 2;
    }
  }
  if (!tls_cert.empty() &&
      (!read_file(tls_cert, "--tls-cert", &cfg.tls_cert_pem) || !read_file(tls_key, "--tls-key", &cfg.tls_key_pem))) {
    return 2;
  }
  if (!tls_client_ca.empty() && !read_file(tls_client_ca, "--tls-client-ca", &cfg.tls_client_ca_pem)) return 2;
  cfg.service.max_memory = max_memory;
  cfg.service.max_sessions = max_clients;
  cfg.service.max_handles = max_handles;
  cfg.service.max_session_calls = max_session_calls;
  cfg.service.max_threads = max_threads;
  cfg.service.max_graph_memory = max_graph_memory;
  cfg.stream_idle = std::chrono::milliseconds(stream_idle_ms);
  if (!pick_devices(devices_spec, &cfg.service.devices)) return 2;
  if (cfg.service.devices.empty()) {
    spdlog::error("no device to serve: bp-devices lists what this machine has");
    return 1;
  }
  cfg.service.server_id = server_id(listen, cfg.service.devices);

  // Signals are taken by sigtimedwait below, in this thread only: block them
  // before gRPC starts its threads, which inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  srv::server server(cfg);
  std::string why;
  if (!server.start(&why)) {
    spdlog::error("{}", why);
    return 1;
  }
  for (bp_device *d : cfg.service.devices) {
    bp_device_info info{};
    info.struct_size = sizeof info;
    if (bp_device_describe(d, &info) == BP_OK) spdlog::info("serving {} ({})", info.name, info.description);
  }
  std::printf("bp-serve: listening on %s\n", server.address().c_str());
  std::fflush(stdout);

  const auto grace = std::chrono::seconds(session_grace_s);
  for (;;) {
    timespec tick{1, 0};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::info("signal {}: stopping", sig);
      break;
    }
    if (size_t n = server.reap(grace)) spdlog::info("closed {} session(s) that opened no lifeline", n);
  }
  server.stop(std::chrono::milliseconds(2000));
  return 0;
}
