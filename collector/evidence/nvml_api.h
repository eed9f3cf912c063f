// Our own declarations of the few NVML pieces sentineld reads (the GPU's clocks, throttle reasons,
// power, temperature, memory errors, PCIe link, XID events and the processes on it), written from
// NVIDIA's NVML API Reference (https://docs.nvidia.com/deploy/nvml-api/, pages named per item
// below). nvml.h is not copied or included: libnvidia-ml.so.1 is opened with dlopen and every
// function is looked up by name (collector/evidence/nvml_reader.h), so a machine without the
// driver still builds and runs sentineld.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sentinel::collector::nvml {

// nvmlReturn_t (API Reference, "nvmlReturn_t" under Device Enums): a C enum, int-sized.
using Return = int;
constexpr Return kSuccess = 0;
constexpr Return kErrorUninitialized = 1;
constexpr Return kErrorInvalidArgument = 2;
constexpr Return kErrorNotSupported = 3;
constexpr Return kErrorNoPermission = 4;
constexpr Return kErrorNotFound = 6;
constexpr Return kErrorInsufficientSize = 7;
constexpr Return kErrorDriverNotLoaded = 9;
constexpr Return kErrorTimeout = 10;
constexpr Return kErrorLibraryNotFound = 12;
constexpr Return kErrorFunctionNotFound = 13;
constexpr Return kErrorGpuIsLost = 15;
constexpr Return kErrorResetRequired = 16;
constexpr Return kErrorUnknown = 999;

// nvmlDevice_t and nvmlEventSet_t: opaque pointers owned by the library.
struct DeviceOpaque;
struct EventSetOpaque;
using Device = DeviceOpaque*;
using EventSet = EventSetOpaque*;

// nvmlClockType_t ("Device Enums"): NVML_CLOCK_SM = 1.
constexpr int kClockSm = 1;
// nvmlTemperatureSensors_t: NVML_TEMPERATURE_GPU = 0.
constexpr int kTemperatureGpu = 0;
// nvmlMemoryErrorType_t: corrected 0, uncorrected 1. nvmlEccCounterType_t: volatile 0 (since the
// last driver load), aggregate 1.
constexpr int kMemoryErrorCorrected = 0;
constexpr int kMemoryErrorUncorrected = 1;
constexpr int kEccVolatile = 0;
// nvmlEnableState_t: 0 disabled, 1 enabled.
constexpr int kFeatureEnabled = 1;

// Clocks event reasons ("NvmlClocksEventReasons" in the R550 reference; the same bits are named
// nvmlClocksThrottleReason* in older ones, "NvmlClocksThrottleReasons" in R525's).
constexpr uint64_t kReasonGpuIdle = 0x1ULL;
constexpr uint64_t kReasonApplicationsClocksSetting = 0x2ULL;
constexpr uint64_t kReasonSwPowerCap = 0x4ULL;
constexpr uint64_t kReasonHwSlowdown = 0x8ULL;
constexpr uint64_t kReasonSyncBoost = 0x10ULL;
constexpr uint64_t kReasonSwThermalSlowdown = 0x20ULL;
constexpr uint64_t kReasonHwThermalSlowdown = 0x40ULL;
constexpr uint64_t kReasonHwPowerBrakeSlowdown = 0x80ULL;
constexpr uint64_t kReasonDisplayClockSetting = 0x100ULL;

// Event types ("Event Types"): nvmlEventTypeXidCriticalError.
constexpr uint64_t kEventTypeXidCriticalError = 0x8ULL;

// Buffer sizes ("Constants"): NVML_DEVICE_UUID_V2_BUFFER_SIZE, NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
// and its _V2 (legacy) form.
constexpr size_t kUuidBufferSize = 96;
constexpr size_t kPciBusIdBufferSize = 32;
constexpr size_t kPciBusIdLegacyBufferSize = 16;

// nvmlPciInfo_t ("nvmlPciInfo_t Struct Reference"), filled by nvmlDeviceGetPciInfo_v3. busId is
// "domain:bus:device.function" with an 8-hex-digit domain, e.g. "00000000:18:00.0".
struct PciInfo {
  char bus_id_legacy[kPciBusIdLegacyBufferSize];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[kPciBusIdBufferSize];
};
static_assert(sizeof(PciInfo) == 68, "nvmlPciInfo_t: 16 + 5 * 4 + 32 bytes");
static_assert(offsetof(PciInfo, bus_id) == 36, "nvmlPciInfo_t.busId");

// nvmlProcessInfo_t ("nvmlProcessInfo_t Struct Reference"), the element of
// nvmlDeviceGetComputeRunningProcesses_v3 and, as nvmlProcessInfo_v2_t with the same layout, of
// _v2. The unversioned (v1) call fills nvmlProcessInfo_v1_t, without the two instance ids.
struct ProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;  // NOLINT(google-runtime-int): NVML's own type
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(sizeof(ProcessInfo) == 24, "nvmlProcessInfo_t");
struct ProcessInfoV1 {
  unsigned int pid;
  unsigned long long used_gpu_memory;  // NOLINT(google-runtime-int): NVML's own type
};
static_assert(sizeof(ProcessInfoV1) == 16, "nvmlProcessInfo_v1_t");

// nvmlEventData_t ("nvmlEventData_t Struct Reference") as nvmlEventSetWait_v2 fills it; eventData
// holds the XID of an nvmlEventTypeXidCriticalError event.
struct EventData {
  Device device;
  unsigned long long event_type;  // NOLINT(google-runtime-int): NVML's own type
  unsigned long long event_data;  // NOLINT(google-runtime-int): NVML's own type
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(sizeof(EventData) == 32, "nvmlEventData_t");

// The functions, by their exported names (the _vN suffix is part of the symbol: nvml.h maps the
// unsuffixed names onto them). Signatures from each function's entry in the API Reference.
using InitFn = Return (*)();                                         // nvmlInit_v2
using ShutdownFn = Return (*)();                                     // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                       // nvmlErrorString
using DeviceGetCountFn = Return (*)(unsigned int*);                  // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);  // ..._v2
using DeviceGetPciInfoFn = Return (*)(Device, PciInfo*);             // nvmlDeviceGetPciInfo_v3
using DeviceGetUuidFn = Return (*)(Device, char*, unsigned int);     // nvmlDeviceGetUUID
// nvmlDeviceGetClockInfo and nvmlDeviceGetMaxClockInfo (clock type, MHz).
using DeviceGetClockFn = Return (*)(Device, int, unsigned int*);
// nvmlDeviceGetCurrentClocksEventReasons, or nvmlDeviceGetCurrentClocksThrottleReasons in
// older drivers (R525's reference has only that name; same bits).
using DeviceGetReasonsFn = Return (*)(Device, unsigned long long*);  // NOLINT(google-runtime-int)
using DeviceGetTemperatureFn = Return (*)(Device, int, unsigned int*);  // sensor, degrees C
// nvmlDeviceGetPowerUsage, nvmlDeviceGetEnforcedPowerLimit (milliwatts); also the unsigned-int
// getters nvmlDeviceGetCurrPcieLinkGeneration, ...MaxPcieLinkGeneration, ...CurrPcieLinkWidth,
// ...MaxPcieLinkWidth and nvmlDeviceGetPcieReplayCounter.
using DeviceGetUintFn = Return (*)(Device, unsigned int*);
// nvmlDeviceGetTotalEccErrors(device, error type, counter type, count).
using DeviceGetEccFn = Return (*)(Device, int, int, unsigned long long*);  // NOLINT
// nvmlDeviceGetRetiredPagesPendingStatus(device, nvmlEnableState_t*).
using DeviceGetEnableStateFn = Return (*)(Device, int*);
// nvmlDeviceGetRemappedRows(device, corrRows, uncRows, isPending, failureOccurred).
using DeviceGetRemappedRowsFn = Return (*)(Device, unsigned int*, unsigned int*, unsigned int*,
                                           unsigned int*);
// nvmlDeviceGetComputeRunningProcesses_v3 / _v2 (ProcessInfo) and the unversioned one
// (ProcessInfoV1): *count in = capacity; NVML_ERROR_INSUFFICIENT_SIZE sets the needed count.
using DeviceGetProcessesFn = Return (*)(Device, unsigned int*, ProcessInfo*);
using DeviceGetProcessesV1Fn = Return (*)(Device, unsigned int*, ProcessInfoV1*);
using EventSetCreateFn = Return (*)(EventSet*);  // nvmlEventSetCreate
// nvmlDeviceRegisterEvents(device, event types, set).
using DeviceRegisterEventsFn = Return (*)(Device, unsigned long long, EventSet);  // NOLINT
// nvmlEventSetWait_v2(set, data, timeout ms): NVML_ERROR_TIMEOUT when nothing is pending.
using EventSetWaitFn = Return (*)(EventSet, EventData*, unsigned int);
using EventSetFreeFn = Return (*)(EventSet);  // nvmlEventSetFree

}  // namespace sentinel::collector::nvml
