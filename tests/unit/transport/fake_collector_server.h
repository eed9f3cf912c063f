// A tiny in-test sentineld stand-in: a UNIX stream server that answers the hello with a chosen
// ack and records every frame it reads, for the CollectorSink tests and the streaming benchmark.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "schemas/wire/sentinel_wire.h"

namespace sentinel::testing {

// A short temp dir (sun_path holds 108 bytes), removed with everything in it on destruction.
class ShortTempDir {
 public:
  ShortTempDir() {
    char tmpl[] = "/tmp/sxt-XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~ShortTempDir() {
    if (!path_.empty()) {
      std::string cmd = "rm -rf '" + path_ + "'";
      int rc = std::system(cmd.c_str());
      (void)rc;
    }
  }
  const std::string& path() const { return path_; }
  std::string File(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

class FakeCollectorServer {
 public:
  enum class AckMode { kAccept, kRefuseMajor, kWrongMajor, kNoAck };
  struct Options {
    AckMode ack = AckMode::kAccept;
    bool read_after_ack = true;      // false: a stalled collector that never reads again
    bool keep_records = true;        // false: count only (the benchmark)
    std::vector<uint8_t> after_ack;  // bytes sent right after an accepting ack (collector frames)
  };

  FakeCollectorServer(std::string path, Options options)
      : path_(std::move(path)), options_(options) {}
  explicit FakeCollectorServer(std::string path)
      : FakeCollectorServer(std::move(path), Options()) {}
  ~FakeCollectorServer() { Stop(); }

  bool Start() {
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.size() >= sizeof(addr.sun_path)) return false;
    std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    unlink(path_.c_str());
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return false;
    if (listen(listen_fd_, 64) != 0) return false;
    if (pipe2(wake_, O_CLOEXEC) != 0) return false;
    thread_ = std::thread([this] { Loop(); });
    return true;
  }

  // Closes every connection and the listener (like a killed collector) and removes the socket.
  void Stop() {
    if (!thread_.joinable()) {
      CloseFd(listen_fd_);
      return;
    }
    char c = 'x';
    ssize_t w = write(wake_[1], &c, 1);
    (void)w;
    thread_.join();
    CloseFd(listen_fd_);
    CloseFd(wake_[0]);
    CloseFd(wake_[1]);
    unlink(path_.c_str());
  }

  // Waits (bounded) until `pred` holds over the server's state; the state is locked meanwhile.
  bool WaitFor(const std::function<bool()>& pred, int timeout_ms = 5000) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), pred);
  }

  // State, read under WaitFor's predicate or via Snapshot().
  struct State {
    int connections = 0;
    std::vector<SentinelWireHello> hellos;
    std::vector<SentinelWireCommInit> comm_inits;
    std::vector<SentinelWireCommEnd> comm_ends;
    std::vector<SentinelWireHeartbeat> heartbeats;
    std::vector<SentinelWireCollRecord> records;
    uint64_t record_count = 0;
    std::vector<std::pair<uint16_t, std::vector<uint8_t>>> others;  // type, payload
    std::vector<uint16_t> types;  // every frame type in arrival order (when keep_records)
    int malformed = 0;
  };
  const State& state() const { return state_; }  // only under WaitFor's predicate
  State Snapshot() {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }
  uint64_t RecordCount() {
    std::lock_guard<std::mutex> lock(mu_);
    return state_.record_count;
  }

 private:
  struct Client {
    int fd = -1;
    bool acked = false;
    std::vector<uint8_t> in;
  };

  static void CloseFd(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
  }

  void Loop() {
    std::vector<Client> clients;
    std::vector<uint8_t> chunk(1 << 16);
    while (true) {
      std::vector<pollfd> pfds;
      pfds.push_back({wake_[0], POLLIN, 0});
      pfds.push_back({listen_fd_, POLLIN, 0});
      for (const Client& c : clients) {
        bool want = !c.acked || options_.read_after_ack;
        pfds.push_back({c.fd, static_cast<short>(want ? POLLIN : 0), 0});
      }
      if (poll(pfds.data(), pfds.size(), 1000) < 0) continue;
      if (pfds[0].revents != 0) break;
      const size_t polled = clients.size();  // a client accepted below was not polled yet
      if (pfds[1].revents & POLLIN) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          clients.push_back(Client{fd, false, {}});
          std::lock_guard<std::mutex> lock(mu_);
          ++state_.connections;
          cv_.notify_all();
        }
      }
      for (size_t i = 0; i < polled; ++i) {
        short rev = pfds[2 + i].revents;
        if (rev == 0) continue;
        Client& c = clients[i];
        if (c.acked && !options_.read_after_ack) continue;  // stalled: never read again
        ssize_t n = read(c.fd, chunk.data(), chunk.size());
        if (n <= 0) {
          CloseFd(c.fd);
          continue;
        }
        c.in.insert(c.in.end(), chunk.begin(), chunk.begin() + n);
        if (!Parse(c)) CloseFd(c.fd);
      }
      std::vector<Client> live;
      for (Client& c : clients) {
        if (c.fd >= 0) live.push_back(std::move(c));
      }
      clients.swap(live);
    }
    for (Client& c : clients) CloseFd(c.fd);
  }

  // Consumes whole frames; false closes the client (malformed).
  bool Parse(Client& c) {
    size_t off = 0;
    std::lock_guard<std::mutex> lock(mu_);
    while (c.in.size() - off >= sizeof(SentinelWireFrameHeader)) {
      SentinelWireFrameHeader h;
      std::memcpy(&h, c.in.data() + off, sizeof(h));
      if (h.size < sizeof(h) || h.size % 8 != 0 || h.size > SENTINEL_WIRE_FRAME_MAX) {
        ++state_.malformed;
        cv_.notify_all();
        return false;
      }
      if (c.in.size() - off < h.size) break;
      const uint8_t* p = c.in.data() + off + sizeof(h);
      size_t len = h.size - sizeof(h);
      if (!c.acked) {
        if (h.type != kSentinelWireHello || len < sizeof(SentinelWireHello)) {
          ++state_.malformed;
          cv_.notify_all();
          return false;
        }
        SentinelWireHello hello;
        std::memcpy(&hello, p, sizeof(hello));
        state_.hellos.push_back(hello);
        c.acked = true;
        if (!SendAck(c.fd)) return false;
      } else {
        Record(h.type, p, len);
      }
      off += h.size;
      if (c.acked && !options_.read_after_ack) break;  // stalled from now on
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(off));
    cv_.notify_all();
    return true;
  }

  bool SendAck(int fd) {
    if (options_.ack == AckMode::kNoAck) return true;
    struct {
      SentinelWireFrameHeader h;
      SentinelWireHelloAck ack;
    } frame{};
    frame.h.size = sizeof(frame);
    frame.h.type = kSentinelWireHelloAck;
    frame.ack.magic = SENTINEL_WIRE_MAGIC;
    frame.ack.major =
        options_.ack == AckMode::kWrongMajor ? SENTINEL_WIRE_MAJOR + 1 : SENTINEL_WIRE_MAJOR;
    frame.ack.minor = SENTINEL_WIRE_MINOR;
    frame.ack.status =
        options_.ack == AckMode::kRefuseMajor ? kSentinelHelloRefusedMajor : kSentinelHelloAccepted;
    if (send(fd, &frame, sizeof(frame), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(frame))) {
      return false;
    }
    const std::vector<uint8_t>& more = options_.after_ack;
    return more.empty() ||
           send(fd, more.data(), more.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(more.size());
  }

  template <typename T>
  static bool Read(const uint8_t* p, size_t len, T* out) {
    if (len < sizeof(T)) return false;
    std::memcpy(out, p, sizeof(T));
    return true;
  }

  void Record(uint16_t type, const uint8_t* p, size_t len) {
    if (type == kSentinelWireColl) {
      ++state_.record_count;
      if (!options_.keep_records) return;
    }
    if (options_.keep_records) state_.types.push_back(type);
    switch (type) {
      case kSentinelWireColl: {
        SentinelWireCollRecord r;
        if (Read(p, len, &r)) state_.records.push_back(r);
        break;
      }
      case kSentinelWireCommInit: {
        SentinelWireCommInit ci;
        if (Read(p, len, &ci)) state_.comm_inits.push_back(ci);
        break;
      }
      case kSentinelWireCommEnd: {
        SentinelWireCommEnd ce;
        if (Read(p, len, &ce)) state_.comm_ends.push_back(ce);
        break;
      }
      case kSentinelWireHeartbeat: {
        SentinelWireHeartbeat hb;
        if (Read(p, len, &hb)) state_.heartbeats.push_back(hb);
        break;
      }
      default:
        state_.others.emplace_back(type, std::vector<uint8_t>(p, p + len));
    }
  }

  std::string path_;
  Options options_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  State state_;
};

}  // namespace sentinel::testing
