// How sentinel-baseline finds its place in the job (rank, world size, local rank, rendezvous
// address, the job's token) from the launcher's environment, and how rank 0 hands the NCCL unique
// id and the sweep to the other ranks: a small TCP exchange at MASTER_ADDR:port in which both
// ends prove they hold the job's token (SENTINEL_BASELINE_TOKEN) before anything is handed out
// (tools/baseline/README.md, "Rendezvous").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "tools/baseline/vendor_api.h"

namespace sentinel::baseline {

struct LaunchInfo {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int port = 0;
  std::string launcher = "single";  // torchrun | mpirun | srun | single
  std::string token;                // SENTINEL_BASELINE_TOKEN: the job's shared secret
};

// Bounds of the token (bytes) and of every size rank 0 may send (the fake 2^64-1 of a squatter,
// or of a broken rank 0, is refused before any buffer is sized from it).
inline constexpr size_t kMinTokenBytes = 16;
inline constexpr size_t kMaxTokenBytes = 1024;
inline constexpr uint64_t kMaxRendezvousBytes = uint64_t{1} << 40;  // 1 TiB
inline constexpr uint32_t kMaxRendezvousSizes = 4096;

using GetEnvFn = std::function<const char*(const char*)>;

// torchrun (RANK, WORLD_SIZE, LOCAL_RANK) first, then Open MPI (OMPI_COMM_WORLD_*), then Slurm
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), else one rank. The address: MASTER_ADDR, else the
// first host of SLURM_JOB_NODELIST (srun), else 127.0.0.1. The port: SENTINEL_BASELINE_PORT, else
// MASTER_PORT + 1 (torchrun's own store holds MASTER_PORT), else 29401. The token:
// SENTINEL_BASELINE_TOKEN, required (kMinTokenBytes..kMaxTokenBytes) when world > 1. An
// InvalidArgument on malformed or missing values, its message saying which and what to do.
absl::Status ReadLaunchInfo(const GetEnvFn& getenv_fn, LaunchInfo* out);

// "node[01-04,07],gpu5" -> "node01"; "a,b" -> "a"; "" -> "".
std::string FirstSlurmHost(const std::string& nodelist);

// What rank 0 sends every other rank.
struct Rendezvous {
  NcclUniqueId id{};
  std::vector<uint64_t> sizes;  // the sweep, decided by rank 0
};

// Rank 0: listens on `port` on all interfaces (0: a port the kernel picks) and returns the
// listening socket, or an Unavailable naming the port and the errno. *bound_port (if not null):
// the port it listens on.
absl::StatusOr<int> ListenForRendezvous(int port, int* bound_port);

// Rank 0: serves `rv` once to each rank 1..world-1 that proves it holds `token`, on `listen_fd`
// (from ListenForRendezvous), waiting at most `timeout_s` in all, then closes it. Connections are
// served concurrently (poll), each for at most kPeerTimeoutS, at most kMaxPeers at once (the
// oldest gives way): idle or lying connections cannot starve the ranks. *refused (if not null):
// connections closed without the id (no proof, wrong rank, too slow). The status's message says
// what failed (a size out of bounds, the ranks that never came, a poll error).
absl::Status ServeRendezvous(int listen_fd, int world, const Rendezvous& rv,
                             const std::string& token, double timeout_s, int* refused = nullptr);
// Other ranks: connect to addr:port (retrying until `timeout_s`) and take the id and sizes only
// from a peer that proves it holds `token`, with every size within kMaxRendezvousBytes.
absl::Status FetchRendezvous(const std::string& addr, int port, int rank, const std::string& token,
                             double timeout_s, Rendezvous* rv);

inline constexpr double kPeerTimeoutS = 10;
inline constexpr size_t kMaxPeers = 512;

}  // namespace sentinel::baseline
