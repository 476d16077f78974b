// raw_h2.hpp: the least HTTP/2 client that makes one gRPC unary call from a
// TCP socket bound to a local port the test chooses, which no gRPC channel
// lets a caller do. It is how a test reconnects "from the same address and
// port" as an earlier connection. Plaintext only; headers are sent as HPACK
// literals without indexing, and the reply is read frame by frame: a
// message in DATA means the call succeeded, none means it was refused (the
// server sends a trailers-only response).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bp_test {

class raw_h2 {
 public:
  raw_h2() = default;
  raw_h2(const raw_h2 &) = delete;
  raw_h2 &operator=(const raw_h2 &) = delete;
  ~raw_h2() { close_graceful(); }

  // Connects to 127.0.0.1:|server_port| from 127.0.0.1:|local_port| (0: any
  // free port) and sends the client preface. False on a socket error; it
  // may be called again then.
  bool connect(uint16_t server_port, uint16_t local_port = 0) {
    close_graceful();
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return false;
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    local.sin_port = htons(local_port);
    if (::bind(fd_, reinterpret_cast<sockaddr *>(&local), sizeof local) != 0) return false;
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    server.sin_port = htons(server_port);
    if (::connect(fd_, reinterpret_cast<sockaddr *>(&server), sizeof server) != 0) return false;
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    return send_all(std::string(preface, sizeof preface - 1)) && send_frame(k_settings, 0, 0, "");
  }

  // The local port this connection was bound to.
  uint16_t local_port() const {
    sockaddr_in a{};
    socklen_t n = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr *>(&a), &n);
    return ntohs(a.sin_port);
  }

  // One unary call of |method| ("/package.Service/Method") on a new stream
  // with |metadata| and the serialized |request|. Returns true when the
  // server answered with a message (in |reply|), false when it ended the
  // stream without one (a refusal) or the connection failed.
  bool call(const std::string &method, const std::vector<std::pair<std::string, std::string>> &metadata,
            const std::string &request, std::string *reply) {
    const uint32_t stream = next_stream_;
    next_stream_ += 2;
    std::string block;
    for (const auto &[k, v] : std::vector<std::pair<std::string, std::string>>{{":method", "POST"},
                                                                               {":scheme", "http"},
                                                                               {":path", method},
                                                                               {":authority", "127.0.0.1"},
                                                                               {"content-type", "application/grpc"},
                                                                               {"te", "trailers"}}) {
      literal(&block, k, v);
    }
    for (const auto &[k, v] : metadata) literal(&block, k, v);
    std::string body(5, '\0');  // gRPC message prefix: not compressed, 32-bit big-endian length
    const uint32_t n = static_cast<uint32_t>(request.size());
    for (int i = 0; i < 4; ++i) body[1 + i] = static_cast<char>(n >> (24 - 8 * i));
    body += request;
    if (!send_frame(k_headers, k_end_headers, stream, block) || !send_frame(k_data, k_end_stream, stream, body)) {
      return false;
    }
    std::string data;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      uint8_t type = 0, flags = 0;
      uint32_t id = 0;
      std::string payload;
      if (!read_frame(deadline, &type, &flags, &id, &payload)) return false;
      if (type == k_settings && !(flags & k_ack)) {
        if (!send_frame(k_settings, k_ack, 0, "")) return false;
      } else if (type == k_goaway) {
        return false;
      } else if (id == stream && type == k_rst_stream) {
        return false;
      } else if (id == stream && (type == k_data || type == k_headers)) {
        if (type == k_data) data += payload;
        if (flags & k_end_stream) break;
      }
    }
    if (data.size() < 5) return false;
    reply->assign(data, 5, std::string::npos);
    return true;
  }

  // Ends the connection with a TCP reset (SO_LINGER 0): the local port is
  // free at once, with no TIME_WAIT, as after a connection that was reset.
  void reset() {
    if (fd_ < 0) return;
    const linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd_);
    fd_ = -1;
  }

 private:
  static constexpr uint8_t k_data = 0, k_headers = 1, k_rst_stream = 3, k_settings = 4, k_goaway = 7;
  static constexpr uint8_t k_end_stream = 1, k_ack = 1, k_end_headers = 4;

  void close_graceful() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // HPACK integer with an |prefix|-bit prefix (RFC 7541 5.1); |first| holds
  // the bits above the prefix.
  static void integer(std::string *out, uint8_t first, int prefix, size_t v) {
    const size_t max = (size_t{1} << prefix) - 1;
    if (v < max) {
      out->push_back(static_cast<char>(first | v));
      return;
    }
    out->push_back(static_cast<char>(first | max));
    v -= max;
    while (v >= 128) {
      out->push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out->push_back(static_cast<char>(v));
  }
  // A literal header field without indexing, new name, no Huffman coding.
  static void literal(std::string *out, const std::string &name, const std::string &value) {
    out->push_back('\0');
    integer(out, 0, 7, name.size());
    *out += name;
    integer(out, 0, 7, value.size());
    *out += value;
  }

  bool send_all(const std::string &bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  bool send_frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string &payload) {
    std::string f(9, '\0');
    const size_t n = payload.size();
    f[0] = static_cast<char>(n >> 16);
    f[1] = static_cast<char>(n >> 8);
    f[2] = static_cast<char>(n);
    f[3] = static_cast<char>(type);
    f[4] = static_cast<char>(flags);
    for (int i = 0; i < 4; ++i) f[5 + i] = static_cast<char>(stream >> (24 - 8 * i));
    return send_all(f + payload);
  }
  bool read_exact(std::chrono::steady_clock::time_point deadline, size_t n, std::string *out) {
    out->clear();
    while (out->size() < n) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[4096];
      const ssize_t got = ::recv(fd_, buf, std::min(sizeof buf, n - out->size()), 0);
      if (got <= 0) return false;
      out->append(buf, static_cast<size_t>(got));
    }
    return true;
  }
  bool read_frame(std::chrono::steady_clock::time_point deadline, uint8_t *type, uint8_t *flags, uint32_t *stream,
                  std::string *payload) {
    std::string h;
    if (!read_exact(deadline, 9, &h)) return false;
    const auto b = [&](int i) { return static_cast<uint32_t>(static_cast<uint8_t>(h[i])); };
    const size_t n = (b(0) << 16) | (b(1) << 8) | b(2);
    *type = static_cast<uint8_t>(b(3));
    *flags = static_cast<uint8_t>(b(4));
    *stream = ((b(5) << 24) | (b(6) << 16) | (b(7) << 8) | b(8)) & 0x7fffffffu;
    return read_exact(deadline, n, payload);
  }

  int fd_ = -1;
  uint32_t next_stream_ = 1;
};

}  // namespace bp_test
