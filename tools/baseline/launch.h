// How sentinel-baseline finds its place in the job (rank, world size, local rank, rendezvous
// address) from the launcher's environment, and how rank 0 hands the NCCL unique id and the sweep
// to the other ranks: a small TCP exchange at MASTER_ADDR:port (tools/baseline/README.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tools/baseline/vendor_api.h"

namespace sentinel::baseline {

struct LaunchInfo {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int port = 0;
  std::string launcher = "single";  // torchrun | mpirun | srun | single
};

using GetEnvFn = std::function<const char*(const char*)>;

// torchrun (RANK, WORLD_SIZE, LOCAL_RANK) first, then Open MPI (OMPI_COMM_WORLD_*), then Slurm
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), else one rank. The address: MASTER_ADDR, else the
// first host of SLURM_JOB_NODELIST (srun), else 127.0.0.1. The port: SENTINEL_BASELINE_PORT, else
// MASTER_PORT + 1 (torchrun's own store holds MASTER_PORT), else 29401. False on malformed values.
[[nodiscard]] bool ReadLaunchInfo(const GetEnvFn& getenv_fn, LaunchInfo* out, std::string* error);

// "node[01-04,07],gpu5" -> "node01"; "a,b" -> "a"; "" -> "".
std::string FirstSlurmHost(const std::string& nodelist);

// What rank 0 sends every other rank.
struct Rendezvous {
  NcclUniqueId id{};
  std::vector<uint64_t> sizes;  // the sweep, decided by rank 0
};

// Rank 0: listens on `port` on all interfaces (0: a port the kernel picks) and returns the
// listening socket, or -1 with *error naming the port and the errno. *bound_port (if not null):
// the port it listens on.
[[nodiscard]] int ListenForRendezvous(int port, int* bound_port, std::string* error);

// Rank 0: serves `rv` to world-1 connections on `listen_fd` (from ListenForRendezvous), waiting at
// most `timeout_s`, then closes it. Other ranks: connect to addr:port (retrying until `timeout_s`)
// and read it.
[[nodiscard]] bool ServeRendezvous(int listen_fd, int world, const Rendezvous& rv, double timeout_s,
                                   std::string* error);
[[nodiscard]] bool FetchRendezvous(const std::string& addr, int port, int rank, double timeout_s,
                                   Rendezvous* rv, std::string* error);

}  // namespace sentinel::baseline
