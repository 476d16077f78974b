// serve_process.hpp: a bp-serve child process for the remote plugin's tests:
// started on a free loopback port (or a given one, to restart it), its
// address read from its "bp-serve: listening on HOST:PORT" line, its output
// kept in a log file the test can read, and killed by signal.
#ifndef BP_TESTS_PLUGINS_REMOTE_SERVE_PROCESS_HPP_
#define BP_TESTS_PLUGINS_REMOTE_SERVE_PROCESS_HPP_

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace bp_test {

inline std::string serve_binary() { return std::string(BP_TEST_BIN_DIR) + "/bp-serve"; }

class serve_process {
 public:
  serve_process() = default;
  serve_process(const serve_process &) = delete;
  serve_process &operator=(const serve_process &) = delete;
  ~serve_process() {
    stop(SIGKILL);
    if (!log_path_.empty()) unlink(log_path_.c_str());
  }

  // Starts bp-serve --listen |listen| |args|; true once it listens (within
  // 30 s), false if it exited or never said so (log() says why).
  bool start(const std::vector<std::string> &args, const std::string &listen = "127.0.0.1:0") {
    char tmpl[] = "/tmp/bp-serve-log.XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) return false;
    log_path_ = tmpl;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<std::string> all{serve_binary(), "--listen", listen};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char *> argv;
      for (auto &a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fd);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < until) {
      const std::string out = log();
      const size_t at = out.find("bp-serve: listening on ");
      if (at != std::string::npos) {
        const size_t from = at + std::string("bp-serve: listening on ").size();
        const size_t end = out.find_first_of(" \n", from);
        if (end != std::string::npos) {
          address_ = out.substr(from, end - from);
          return true;
        }
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  void stop(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  const std::string &address() const { return address_; }
  std::string port() const { return address_.substr(address_.rfind(':') + 1); }
  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  pid_t pid_ = -1;
  std::string address_;
  std::string log_path_;
};

}  // namespace bp_test

#endif  // BP_TESTS_PLUGINS_REMOTE_SERVE_PROCESS_HPP_
