// Stream -> communicator registry behind fakeNcclSynchronizeStream; see stream_sync.h.
#include "tests/fakes/fake_nccl/stream_sync.h"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace sentinel::testing {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::pair<cudaStream_t, ncclComm_t>> uses;  // distinct pairs
};
Registry& R() {
  static Registry* r = new Registry();  // leaked: used until exit
  return *r;
}

}  // namespace

void NoteStreamUse(cudaStream_t stream, ncclComm_t comm) {
  Registry& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  auto use = std::make_pair(stream, comm);
  if (std::find(r.uses.begin(), r.uses.end(), use) == r.uses.end()) r.uses.push_back(use);
}

void ForgetComm(ncclComm_t comm) {
  Registry& r = R();
  std::lock_guard<std::mutex> lock(r.mu);
  r.uses.erase(std::remove_if(r.uses.begin(), r.uses.end(),
                              [&](const auto& use) { return use.second == comm; }),
               r.uses.end());
}

}  // namespace sentinel::testing

extern "C" __attribute__((visibility("default"))) ncclResult_t fakeNcclSynchronizeStream(
    cudaStream_t stream) {
  sentinel::testing::Registry& r = sentinel::testing::R();
  // Held while waiting: a communicator cannot be destroyed under us (ForgetComm waits).
  std::lock_guard<std::mutex> lock(r.mu);
  ncclResult_t result = ncclSuccess;
  for (const auto& [s, comm] : r.uses) {
    if (s != stream) continue;
    ncclResult_t rc = fakeNcclStreamSynchronize(comm);
    if (result == ncclSuccess) result = rc;
  }
  return result;
}
