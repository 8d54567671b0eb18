// SPDX-License-Identifier: Apache-2.0
// The CUDA driver, loaded at run time: dlopen("libcuda.so.1") and each driver API entry point
// resolved by name into a table of function pointers typed here (cuda.h is never included by
// host code, so the library builds and runs without the toolkit's headers or the driver).
//
// Why a dlopen'ed driver and not a plugin module or a link against libcuda/libcudart: the
// core library must run unchanged on machines without CUDA (the tier then reports "not
// available" and everything else works), so nothing NVIDIA may appear in its DT_NEEDED list;
// and the driver API is stable across driver versions, which a runtime-API link is not
// (docs/gpu.md has the whole argument).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cxltier::cuda {

// --- Driver API types, as the driver ABI defines them (cuda.h, CUDA 11 to 13). -----------------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // always 64 bits on the platforms we build for
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
struct CUmod_st;
struct CUfunc_st;
using CUcontext = CUctx_st *;
using CUstream = CUstream_st *;
using CUevent = CUevent_st *;
using CUmodule = CUmod_st *;
using CUfunction = CUfunc_st *;

// The result codes we act on or name in messages (values from cuda.h).
inline constexpr CUresult kSuccess = 0;
inline constexpr CUresult kErrorInvalidValue = 1;
inline constexpr CUresult kErrorOutOfMemory = 2;
inline constexpr CUresult kErrorNotInitialized = 3;
inline constexpr CUresult kErrorStubLibrary = 34;
inline constexpr CUresult kErrorInsufficientDriver = 35;
inline constexpr CUresult kErrorNoDevice = 100;
inline constexpr CUresult kErrorNotReady = 600;
inline constexpr CUresult kErrorHostMemoryAlreadyRegistered = 712;
inline constexpr CUresult kErrorHostMemoryNotRegistered = 713;

// Device attributes (CUdevice_attribute values).
inline constexpr int kAttrMultiprocessorCount = 16;
inline constexpr int kAttrCanMapHostMemory = 19;
inline constexpr int kAttrAsyncEngineCount = 40;
inline constexpr int kAttrUnifiedAddressing = 41;
inline constexpr int kAttrComputeCapabilityMajor = 75;
inline constexpr int kAttrComputeCapabilityMinor = 76;
inline constexpr int kAttrCanUseHostPointerForRegisteredMem = 91;
inline constexpr int kAttrHostRegisterSupported = 99;
inline constexpr int kAttrHostNumaId = 134;  // CUDA 12.2+ drivers; older ones answer INVALID_VALUE

// Flags.
inline constexpr unsigned kMemHostRegisterPortable = 0x01;   // pinned for every context
inline constexpr unsigned kMemHostRegisterDeviceMap = 0x02;  // kernels may address it
inline constexpr unsigned kStreamNonBlocking = 0x1;          // no implicit sync with stream 0
inline constexpr unsigned kEventDisableTiming = 0x2;

// The entry points we use, resolved one by one. The names are the versioned symbols the driver
// exports (cuMemAlloc_v2, not cuMemAlloc, which is the 32-bit legacy entry point).
struct DriverApi {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuGetErrorString)(CUresult error, const char **str);
  CUresult (*cuGetErrorName)(CUresult error, const char **str);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
  CUresult (*cuDeviceGetAttribute)(int *value, int attrib, CUdevice dev);
  CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev);                // _v2
  CUresult (*cuDeviceGetPCIBusId)(char *bus_id, int len, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);                      // _v2, else v1
  CUresult (*cuCtxPushCurrent)(CUcontext ctx);                              // _v2
  CUresult (*cuCtxPopCurrent)(CUcontext *ctx);                              // _v2
  CUresult (*cuMemGetInfo)(size_t *free_bytes, size_t *total_bytes);        // _v2
  CUresult (*cuMemAlloc)(CUdeviceptr *dptr, size_t bytes);                  // _v2
  CUresult (*cuMemFree)(CUdeviceptr dptr);                                  // _v2
  CUresult (*cuMemAllocHost)(void **p, size_t bytes);                       // _v2
  CUresult (*cuMemFreeHost)(void *p);
  CUresult (*cuMemHostRegister)(void *p, size_t bytes, unsigned flags);     // _v2
  CUresult (*cuMemHostUnregister)(void *p);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *dptr, void *p, unsigned flags);  // _v2
  CUresult (*cuMemHostGetFlags)(unsigned *flags, void *p);
  CUresult (*cuMemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream);  // _v2
  CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);        // _v2
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);  // _v2
  CUresult (*cuStreamCreate)(CUstream *stream, unsigned flags);
  CUresult (*cuStreamDestroy)(CUstream stream);                             // _v2
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags);
  CUresult (*cuEventCreate)(CUevent *event, unsigned flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventQuery)(CUevent event);
  CUresult (*cuEventDestroy)(CUevent event);                                // _v2
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
  CUresult (*cuModuleLoadData)(CUmodule *module, const void *image);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule module, const char *name);
  CUresult (*cuLaunchKernel)(CUfunction f, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                             unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream stream,
                             void **params, void **extra);
};

// One entry of the symbol table: the member, the symbol names to try in order.
struct DriverSymbol {
  const char *member;                  // "cuMemAlloc"
  // {"cuMemAlloc_v2"}: the name to look up, then an optional fallback (nullptr when none). A
  // plain array, not a std::vector<const char *>: that instantiation would be exported by
  // libcxltier.so in CUDA builds only (std:: templates over non-hidden types keep default
  // visibility), and the export list must not depend on the build (tests/gpu gpu_symbols).
  const char *names[2];
};
// Every entry point DriverApi holds, in member order (tests print and check it).
const std::vector<DriverSymbol> &driver_symbols();

// The outcome of loading a driver library.
struct DriverLoad {
  bool ok = false;            // every symbol resolved and cuInit(0) succeeded
  std::string path;           // what was dlopen'ed
  std::string why;            // when !ok: one line saying what failed, for "not available" messages
  std::vector<std::string> missing;  // symbols the library lacks (when that was the failure)
  CUresult init_result = kSuccess;   // cuInit's result when it was called
  int driver_version = 0;     // e.g. 12040 for CUDA 12.4; 0 if unknown
  DriverApi api{};            // valid only when ok
};

// Load a driver library: dlopen(path) (RTLD_NOW | RTLD_LOCAL), resolve every symbol, call
// cuInit(0). Never throws. The library is never dlclose'd (drivers keep threads and state that
// do not survive unloading), so each call that opens a new library keeps it for the process.
DriverLoad load_driver(const std::string &path);

// The driver this process uses, loaded once (thread-safe): the library named by the
// environment variable CXLT_CUDA_DRIVER if set (tests point it at the toolkit's stub), else
// "libcuda.so.1", the name the NVIDIA driver installs (never "libcuda.so", which exists only
// with the toolkit and may be its stub).
const DriverLoad &driver();

// The name of a driver result ("CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"): the driver's own
// strings when it gives them (the stub gives none), else our table, else the number.
std::string result_string(const DriverApi *api, CUresult r);

// Make a context current for a scope and restore the caller's afterwards, so calls on an
// engine's thread never change which context the engine has current.
class ScopedContext {
public:
  ScopedContext(const DriverApi &api, CUcontext ctx) noexcept;
  ~ScopedContext();
  ScopedContext(const ScopedContext &) = delete;
  ScopedContext &operator=(const ScopedContext &) = delete;
  CUresult result() const noexcept { return result_; }

private:
  const DriverApi &api_;
  CUresult result_;
};

}  // namespace cxltier::cuda
