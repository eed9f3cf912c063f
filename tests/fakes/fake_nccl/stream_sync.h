// Which communicators have work on which (fake) CUDA stream, so that a fake CUDA runtime can wait
// for a stream the way cudaStreamSynchronize does (fakeNcclSynchronizeStream in fake_nccl.h).
#pragma once

#include "tests/fakes/fake_nccl/fake_nccl.h"

namespace sentinel::testing {

// An operation was enqueued on `stream` for `comm`.
void NoteStreamUse(cudaStream_t stream, ncclComm_t comm);
// `comm` is being destroyed: forget it (waits for a synchronize in progress to finish).
void ForgetComm(ncclComm_t comm);

}  // namespace sentinel::testing
