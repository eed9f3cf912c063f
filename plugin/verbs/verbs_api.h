// The libibverbs functions the guard uses, as a table of function pointers filled at run time with
// dlopen("libibverbs.so.1") + dlsym (docs/cupti-verbs-facts.md, "3.6 Loading libibverbs and its
// side effects"). We declare the few types we
// touch ourselves and never include <infiniband/verbs.h>. Query-only: nothing here registers
// memory, so NCCL's ibv_fork_init() is never disturbed. Tests pass a fake table.
#pragma once

#include "plugin/base/status.h"

namespace sentinel::plugin {

struct VerbsApi {
  // struct ibv_device** ibv_get_device_list(int* num_devices); NULL + errno on failure.
  void** (*get_device_list)(int* num_devices) = nullptr;
  // void ibv_free_device_list(struct ibv_device** list);
  void (*free_device_list)(void** list) = nullptr;
  // const char* ibv_get_device_name(struct ibv_device* device);
  const char* (*get_device_name)(void* device) = nullptr;
  // ibv_reg_dmabuf_mr (IBVERBS_1.12) is exported: the NIC side of the dma-buf GDR path may work.
  bool has_reg_dmabuf_mr = false;
};

// The process-wide table, loading libibverbs on first use (thread-safe, once; every call gives the
// same answer). Ok with *api set to the table; else *api is null and the status says why:
// kNotFound when the library or one of the required symbols is absent (dlerror's text; that
// evidence is then missing, which the guard does not count as an error), kResourceExhausted
// when the table cannot be allocated. The handle is never closed (NCCL holds the same library).
Status LoadVerbsApi(const VerbsApi** api) noexcept;

}  // namespace sentinel::plugin
