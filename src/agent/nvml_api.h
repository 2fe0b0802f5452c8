/* nvml_api.h - the subset of NVIDIA's NVML ABI that gpuheal uses, declared by
 * hand (NVIDIA's nvml.h is not packaged for Debian): return codes, enums,
 * the structs we pass by pointer, and one function-pointer type per symbol
 * we dlsym. Values are NVML's (nvml.h, NVML_API_VERSION 12/13; see
 * shared/data/gpu-signals.md section 3). Types and constants keep NVIDIA's
 * names so that a reader can check each one against the vendor header; the
 * function-pointer types are ours (gh_nvml_*_fn).
 *
 * Shared by src/agent/nvml.c (the real source, through dlopen) and by the
 * fault-injection library under test/nvml-fake (which defines the opaque
 * structs and exports the versioned symbols). Types only; no state. */
#ifndef GH_AGENT_NVML_API_H
#define GH_AGENT_NVML_API_H

/* nvmlReturn_t: every NVML call returns one. */
typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* Opaque handles (pointers owned by the library). */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

typedef enum nvmlEnableState_enum {
    NVML_FEATURE_DISABLED = 0,
    NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

/* SBE are "corrected", DBE "uncorrected". */
typedef enum nvmlMemoryErrorType_enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
} nvmlMemoryErrorType_t;

/* Volatile: since the driver loaded. Aggregate: persistent (inforom). */
typedef enum nvmlEccCounterType_enum {
    NVML_VOLATILE_ECC = 0,
    NVML_AGGREGATE_ECC = 1
} nvmlEccCounterType_t;

typedef enum nvmlTemperatureSensors_enum {
    NVML_TEMPERATURE_GPU = 0
} nvmlTemperatureSensors_t;

typedef enum nvmlTemperatureThresholds_enum {
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
    NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2,
    NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3
} nvmlTemperatureThresholds_t;

typedef enum nvmlPageRetirementCause_enum {
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
} nvmlPageRetirementCause_t;

typedef enum nvmlNvLinkErrorCounter_enum {
    NVML_NVLINK_ERROR_DL_REPLAY = 0,
    NVML_NVLINK_ERROR_DL_RECOVERY = 1,
    NVML_NVLINK_ERROR_DL_CRC_FLIT = 2,
    NVML_NVLINK_ERROR_DL_CRC_DATA = 3
} nvmlNvLinkErrorCounter_t;

#define NVML_NVLINK_MAX_LINKS                  18
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE     32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE  16
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE        96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80

/* Event type bits (nvmlDeviceRegisterEvents). */
#define nvmlEventTypeSingleBitEccError 0x0000000000000001ULL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002ULL
#define nvmlEventTypeXidCriticalError  0x0000000000000008ULL

/* Clock-event ("throttle") reason bits. */
#define nvmlClocksEventReasonGpuIdle          0x0000000000000001ULL
#define nvmlClocksEventReasonSwPowerCap       0x0000000000000004ULL
#define nvmlClocksThrottleReasonHwSlowdown    0x0000000000000008ULL
#define nvmlClocksEventReasonSwThermalSlowdown 0x0000000000000020ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown 0x0000000000000040ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown 0x0000000000000080ULL

/* nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v3. */
typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

/* One event from nvmlEventSetWait_v2; for XidCriticalError eventData is
 * the Xid (999 = unknown Xid). */
typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t ABI");
_Static_assert(sizeof(void *) != 8 || sizeof(nvmlEventData_t) == 32, "nvmlEventData_t ABI");

/* Function-pointer types, one per symbol (the symbol name is the part
 * between gh_ and _fn). */
typedef nvmlReturn_t (*gh_nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*gh_nvmlShutdown_fn)(void);
typedef const char *(*gh_nvmlErrorString_fn)(nvmlReturn_t result);
typedef nvmlReturn_t (*gh_nvmlSystemGetDriverVersion_fn)(char *version, unsigned int length);
typedef nvmlReturn_t (*gh_nvmlDeviceGetCount_v2_fn)(unsigned int *count);
typedef nvmlReturn_t (*gh_nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int index,
                                                          nvmlDevice_t *device);
typedef nvmlReturn_t (*gh_nvmlDeviceGetPciInfo_v3_fn)(nvmlDevice_t device, nvmlPciInfo_t *pci);
typedef nvmlReturn_t (*gh_nvmlDeviceGetUUID_fn)(nvmlDevice_t device, char *uuid,
                                                unsigned int length);
typedef nvmlReturn_t (*gh_nvmlDeviceGetTemperature_fn)(nvmlDevice_t device,
                                                       nvmlTemperatureSensors_t sensor,
                                                       unsigned int *temp);
typedef nvmlReturn_t (*gh_nvmlDeviceGetTemperatureThreshold_fn)(
    nvmlDevice_t device, nvmlTemperatureThresholds_t type, unsigned int *temp);
typedef nvmlReturn_t (*gh_nvmlDeviceGetPowerUsage_fn)(nvmlDevice_t device,
                                                      unsigned int *milliwatts);
typedef nvmlReturn_t (*gh_nvmlDeviceGetEnforcedPowerLimit_fn)(nvmlDevice_t device,
                                                              unsigned int *milliwatts);
typedef nvmlReturn_t (*gh_nvmlDeviceGetCurrentClocksEventReasons_fn)(
    nvmlDevice_t device, unsigned long long *reasons);
typedef nvmlReturn_t (*gh_nvmlDeviceGetTotalEccErrors_fn)(nvmlDevice_t device,
                                                          nvmlMemoryErrorType_t type,
                                                          nvmlEccCounterType_t counter,
                                                          unsigned long long *count);
typedef nvmlReturn_t (*gh_nvmlDeviceGetRemappedRows_fn)(nvmlDevice_t device,
                                                        unsigned int *corrRows,
                                                        unsigned int *uncRows,
                                                        unsigned int *isPending,
                                                        unsigned int *failureOccurred);
typedef nvmlReturn_t (*gh_nvmlDeviceGetRetiredPages_fn)(nvmlDevice_t device,
                                                        nvmlPageRetirementCause_t cause,
                                                        unsigned int *pageCount,
                                                        unsigned long long *addresses);
typedef nvmlReturn_t (*gh_nvmlDeviceGetRetiredPagesPendingStatus_fn)(
    nvmlDevice_t device, nvmlEnableState_t *isPending);
typedef nvmlReturn_t (*gh_nvmlDeviceGetPcieReplayCounter_fn)(nvmlDevice_t device,
                                                             unsigned int *value);
typedef nvmlReturn_t (*gh_nvmlDeviceGetNvLinkState_fn)(nvmlDevice_t device, unsigned int link,
                                                       nvmlEnableState_t *isActive);
typedef nvmlReturn_t (*gh_nvmlDeviceGetNvLinkErrorCounter_fn)(nvmlDevice_t device,
                                                              unsigned int link,
                                                              nvmlNvLinkErrorCounter_t counter,
                                                              unsigned long long *value);
typedef nvmlReturn_t (*gh_nvmlEventSetCreate_fn)(nvmlEventSet_t *set);
typedef nvmlReturn_t (*gh_nvmlDeviceGetSupportedEventTypes_fn)(nvmlDevice_t device,
                                                               unsigned long long *types);
typedef nvmlReturn_t (*gh_nvmlDeviceRegisterEvents_fn)(nvmlDevice_t device,
                                                       unsigned long long types,
                                                       nvmlEventSet_t set);
typedef nvmlReturn_t (*gh_nvmlEventSetWait_v2_fn)(nvmlEventSet_t set, nvmlEventData_t *data,
                                                  unsigned int timeoutms);
typedef nvmlReturn_t (*gh_nvmlEventSetFree_fn)(nvmlEventSet_t set);

#endif
