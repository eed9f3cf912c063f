// A stand-in for sentineld in the plugin's trust tests: a UNIX-socket server that speaks just
// enough of the wire (schemas/wire/wire_format.md) to be the plugin's peer, and can behave as an
// attacker would. Run as another uid through setpriv, or with --listen-uid.
//
//   fake_sentineld --socket PATH --stats FILE [--mode MODE] [--count N] [--listen-uid UID]
//                  [--make-dir MODE_OCTAL] [--flood-s S] [--min-completed N]
//
//   --make-dir: create the socket's directory with this mode first (after --listen-uid's drop,
//               if any, or as whoever runs it).
//   --listen-uid: bind as the starting user, then drop to UID (and its gid) before listen(2): the
//               kernel then reports UID as the listener (SO_PEERCRED) in a directory UID cannot
//               write to.
//   modes:
//     accept      handshake, then read and count frames (default);
//     wrong-seq   when rank 0 reports a collective in flight, send N verdicts naming it with
//                 another NCCL seq, claimed stuck 31 s;
//     young       the same with the right ordinal and seq, claimed stuck 31 s;
//     tiny        the same, claimed stuck 1 ns (the daemon's --hang-timeout said to be 30 s);
//     short-timeout  the same, claimed stuck for the rank's own time so far, with a daemon
//                 --hang-timeout of 1 ms;
//     escape      once rank 0 has been inside it for 1.5 s, one verdict naming it rightly (its
//                 own time, --hang-timeout 1 s) whose culprit and exclusion strings hold a
//                 newline, a forged "[sentinel]" line and terminal escapes;
//     flood       after the ack, write verdict frames (for a communicator nobody has) as fast
//                 as the plugin takes them, for --flood-s seconds (default 30).
//
// FILE is rewritten after each change: "connections=C hellos=H frames=F verdicts_sent=V".
// Exits on SIGTERM or after 120 s.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "schemas/wire/sentinel_wire.h"

namespace {

volatile sig_atomic_t g_stop = 0;
void OnTerm(int) { g_stop = 1; }

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

double NowS() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Stats {
  int connections = 0;
  int hellos = 0;
  long frames = 0;
  long verdicts_sent = 0;
};

void WriteStats(const std::string& path, const Stats& s) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  std::fprintf(f, "connections=%d hellos=%d frames=%ld verdicts_sent=%ld\n", s.connections,
               s.hellos, s.frames, s.verdicts_sent);
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

struct Client {
  int fd = -1;
  std::vector<uint8_t> in;
  bool acked = false;
  bool told = false;  // the verdicts of a verdict mode were sent
  std::vector<uint8_t> out;
  size_t flood_off = 0;    // where in the flood block the next send starts
  size_t flood_bytes = 0;  // flood bytes the kernel took
};

constexpr size_t kVerdictFrame = sizeof(SentinelWireFrameHeader) + sizeof(SentinelWireHangVerdict);

void Frame(std::vector<uint8_t>* out, uint16_t type, const void* payload, size_t size) {
  SentinelWireFrameHeader h{};
  h.size = static_cast<uint32_t>((sizeof(h) + size + 7) / 8 * 8);
  h.type = type;
  const size_t at = out->size();
  out->resize(at + h.size, 0);
  std::memcpy(out->data() + at, &h, sizeof(h));
  std::memcpy(out->data() + at + sizeof(h), payload, size);
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket_path;
  std::string stats_path;
  std::string mode = "accept";
  long count = 1;
  long listen_uid = -1;
  long make_dir = -1;
  double flood_s = 30;
  // The verdict modes answer the first in-flight report of rank 0 that has completed at least
  // this many collectives: the test's late collective, not an earlier one a periodic report
  // happened to catch in progress (on a loaded host that one has completed by the time the
  // verdict arrives, and the plugin rightly ignores it).
  long min_completed = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--socket") {
      socket_path = v;
    } else if (a == "--stats") {
      stats_path = v;
    } else if (a == "--mode") {
      mode = v;
    } else if (a == "--count") {
      count = std::atol(v);
    } else if (a == "--listen-uid") {
      listen_uid = std::atol(v);
    } else if (a == "--make-dir") {
      make_dir = std::strtol(v, nullptr, 8);
    } else if (a == "--flood-s") {
      flood_s = std::atof(v);
    } else if (a == "--min-completed") {
      min_completed = std::atol(v);
    } else {
      std::fprintf(stderr, "fake_sentineld: unknown option %s\n", a.c_str());
      return 64;
    }
  }
  if (socket_path.empty() || stats_path.empty()) return 64;
  signal(SIGTERM, OnTerm);
  signal(SIGPIPE, SIG_IGN);
  Stats stats;
  WriteStats(stats_path, stats);

  if (make_dir >= 0) {
    const std::string dir = socket_path.substr(0, socket_path.rfind('/'));
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      std::perror("fake_sentineld: mkdir");
      return 2;
    }
    if (chmod(dir.c_str(), static_cast<mode_t>(make_dir)) != 0) return 2;
  }
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (lfd < 0 || socket_path.size() >= sizeof(addr.sun_path)) return 2;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  unlink(socket_path.c_str());
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::perror("fake_sentineld: bind");
    return 2;
  }
  chmod(socket_path.c_str(), 0666);  // anybody may connect: the plugin must judge who listens
  if (listen_uid >= 0) {
    const auto id = static_cast<uid_t>(listen_uid);
    if (setresgid(id, id, id) != 0 || setresuid(id, id, id) != 0) return 3;
  }
  if (listen(lfd, 16) != 0) return 2;
  std::printf("fake_sentineld: listening at %s as uid %u\n", socket_path.c_str(),
              static_cast<unsigned>(geteuid()));
  std::fflush(stdout);

  // The flood: 256 verdicts for a communicator nobody has, claimed stuck 31 s.
  std::vector<uint8_t> flood;
  {
    SentinelWireHangVerdict v{};
    v.comm_hash = 0x5e47140d;
    v.ordinal = 7;
    v.seq = 6;
    v.waiting_ns = 31'000'000'000LL;
    std::snprintf(v.culprits, sizeof(v.culprits), "rank 9 never_launched on host nowhere");
    for (int k = 0; k < 256; ++k) Frame(&flood, kSentinelWireHangVerdict, &v, sizeof(v));
  }
  std::vector<Client> clients;
  Stats written = stats;
  const double started = NowS();
  double flood_until = 0;
  while (!g_stop && NowS() - started < 120) {
    std::vector<pollfd> pfds;
    pfds.push_back({lfd, POLLIN, 0});
    const bool flooding = mode == "flood" && flood_until > 0 && NowS() < flood_until;
    for (const Client& c : clients) {
      short ev = POLLIN;
      if (!c.out.empty() || (flooding && c.acked)) ev |= POLLOUT;
      pfds.push_back({c.fd, ev, 0});
    }
    if (poll(pfds.data(), pfds.size(), 50) < 0) continue;
    const size_t polled = clients.size();
    if (pfds[0].revents & POLLIN) {
      int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        clients.push_back(Client{fd, {}, false, false, {}, 0, 0});
        ++stats.connections;
        WriteStats(stats_path, stats);
      }
    }
    for (size_t i = 0; i < polled; ++i) {
      Client& c = clients[i];
      const short rev = pfds[1 + i].revents;
      if (rev & (POLLIN | POLLHUP | POLLERR)) {
        uint8_t buf[65536];
        ssize_t n = read(c.fd, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          close(c.fd);
          c.fd = -1;
          continue;
        }
        if (n > 0) c.in.insert(c.in.end(), buf, buf + n);
      }
      // Whole frames: the hello (answered with an accepting ack), then anything.
      size_t off = 0;
      while (c.in.size() - off >= sizeof(SentinelWireFrameHeader)) {
        SentinelWireFrameHeader h;
        std::memcpy(&h, c.in.data() + off, sizeof(h));
        if (h.size < sizeof(h) || h.size > SENTINEL_WIRE_FRAME_MAX) {
          c.in.clear();
          off = 0;
          break;
        }
        if (c.in.size() - off < h.size) break;
        const uint8_t* p = c.in.data() + off + sizeof(h);
        ++stats.frames;
        if (h.type == kSentinelWireHello && !c.acked) {
          ++stats.hellos;
          c.acked = true;
          SentinelWireHelloAck ack{};
          ack.magic = SENTINEL_WIRE_MAGIC;
          ack.major = SENTINEL_WIRE_MAJOR;
          ack.minor = SENTINEL_WIRE_MINOR;
          ack.status = kSentinelHelloAccepted;
          Frame(&c.out, kSentinelWireHelloAck, &ack, sizeof(ack));
          if (mode == "flood") {
            flood_until = NowS() + flood_s;
            // A deep socket buffer (root may exceed wmem_max): the kernel holds megabytes of
            // frames, so a reader that takes one frame at a time never catches up with us.
            int bytes = 16 << 20;
            (void)setsockopt(c.fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes));
          }
        } else if (h.type == kSentinelWireInFlight && !c.told &&
                   h.size >= sizeof(h) + sizeof(SentinelWireInFlight) &&
                   (mode == "wrong-seq" || mode == "young" || mode == "escape" || mode == "tiny" ||
                    mode == "short-timeout")) {
          SentinelWireInFlight in;
          std::memcpy(&in, p, sizeof(in));
          // The rank's own time inside it (the plugin's clock is CLOCK_MONOTONIC too).
          const int64_t own_ns = NowNs() - in.oldest_since_ns;
          if (in.rank == 0 && in.enqueued > in.completed && in.oldest_since_ns > 0 &&
              in.completed >= static_cast<uint64_t>(min_completed) &&
              (mode != "escape" || own_ns >= 1'500'000'000)) {
            c.told = true;
            SentinelWireHangVerdict v{};
            v.comm_hash = in.comm_hash;
            v.rank = 0;
            v.ordinal = in.completed + 1;
            v.seq = mode == "wrong-seq" ? in.oldest_seq + 1000 : in.oldest_seq;
            v.func = in.oldest_func;
            v.waiting_ns = 31'000'000'000LL;
            v.hang_timeout_ns = 30'000'000'000LL;
            if (mode == "tiny") v.waiting_ns = 1;
            if (mode == "short-timeout" || mode == "escape") {
              v.waiting_ns = std::max<int64_t>(own_ns, 1);
            }
            if (mode == "short-timeout") v.hang_timeout_ns = 1'000'000;
            if (mode == "escape") v.hang_timeout_ns = 1'000'000'000;
            v.n_culprits = 1;
            v.culprit_ranks[0] = 1;
            v.culprit_roles[0] = kSentinelHangRoleNeverLaunched;
            if (mode == "escape") {
              std::snprintf(v.culprits, sizeof(v.culprits),
                            "rank 1\n[sentinel 1] FORGED LINE\x1b[2J\x1b[31mred\x07");
              std::snprintf(v.exclude, sizeof(v.exclude), "host-x\r\x1b]0;title\x07");
            } else {
              std::snprintf(v.culprits, sizeof(v.culprits), "rank 1 never_launched on host x");
              std::snprintf(v.exclude, sizeof(v.exclude), "none");
            }
            std::snprintf(v.alert_id, sizeof(v.alert_id), "hang-forged");
            const long n = mode == "escape" ? 1 : count;
            for (long k = 0; k < n; ++k) Frame(&c.out, kSentinelWireHangVerdict, &v, sizeof(v));
            stats.verdicts_sent += n;
          }
        }
        off += h.size;
      }
      c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(off));
      if (flooding && c.acked && c.out.empty()) {
        // One big block sent over and over from where the last send stopped: one send(2) moves
        // what the socket takes, so the writer always outpaces a reader of one frame at a time.
        ssize_t n = send(c.fd, flood.data() + c.flood_off, flood.size() - c.flood_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          c.flood_off += static_cast<size_t>(n);
          c.flood_bytes += static_cast<size_t>(n);
          if (c.flood_off == flood.size()) c.flood_off = 0;
          stats.verdicts_sent = static_cast<long>(c.flood_bytes / kVerdictFrame);
        }
      }
      while (!c.out.empty()) {
        ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0) break;
        c.out.erase(c.out.begin(), c.out.begin() + n);
      }
    }
    std::vector<Client> live;
    for (Client& c : clients) {
      if (c.fd >= 0) live.push_back(std::move(c));
    }
    clients.swap(live);
    if (stats.frames != written.frames || stats.verdicts_sent != written.verdicts_sent ||
        stats.hellos != written.hellos || stats.connections != written.connections) {
      WriteStats(stats_path, stats);
      written = stats;
    }
  }
  for (Client& c : clients) close(c.fd);
  unlink(socket_path.c_str());
  return 0;
}
