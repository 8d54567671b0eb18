// SPDX-License-Identifier: Apache-2.0
// Loading the CUDA driver with dlopen and resolving its entry points one by one, with messages
// that say exactly what is missing ("not available: libcuda.so.1: cannot open shared object
// file", "the library lacks cuMemHostRegister_v2", "cuInit failed: CUDA_ERROR_NO_DEVICE").
// Only the failure paths have run so far (no GPU on the machines this was written on).
#include "tiers/cuda/driver.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace cxltier::cuda {

namespace {

// Our own names for the codes a user is likely to meet, for drivers (the stub) that give none.
const char *known_result_name(CUresult r) {
  switch (r) {
    case 0: return "CUDA_SUCCESS";
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 4: return "CUDA_ERROR_DEINITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 46: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 200: return "CUDA_ERROR_INVALID_IMAGE";
    case 201: return "CUDA_ERROR_INVALID_CONTEXT";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 304: return "CUDA_ERROR_OPERATING_SYSTEM";
    case 400: return "CUDA_ERROR_INVALID_HANDLE";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 600: return "CUDA_ERROR_NOT_READY";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 712: return "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED";
    case 713: return "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED";
    case 719: return "CUDA_ERROR_LAUNCH_FAILED";
    case 800: return "CUDA_ERROR_NOT_PERMITTED";
    case 801: return "CUDA_ERROR_NOT_SUPPORTED";
    case 802: return "CUDA_ERROR_SYSTEM_NOT_READY";
    case 803: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 999: return "CUDA_ERROR_UNKNOWN";
  }
  return nullptr;
}

// What to do about the codes whose name alone does not tell a user (kept apart from the name so
// that every message reads "NAME (code)" whatever the code).
const char *known_result_hint(CUresult r) {
  switch (r) {
    case 34: return "the toolkit's stub libcuda.so, not a driver";
    case 35: return "the driver is older than this code needs";
    case 802: return "is nvidia-fabricmanager running?";
    case 803: return "the kernel module and libcuda differ";
  }
  return nullptr;
}

// Where each DriverApi member is, for the resolution loop. Same order as driver_symbols(). A
// vector of a type of this file, not std::vector<void **>, whose instantiation libcxltier.so
// would export in CUDA builds only (see DriverSymbol in driver.hpp).
struct Slot {
  void **where;
};
#define CXLT_MEMBER(m) Slot{reinterpret_cast<void **>(&api->m)}
std::vector<Slot> member_slots(DriverApi *api) {
  return {CXLT_MEMBER(cuInit), CXLT_MEMBER(cuDriverGetVersion), CXLT_MEMBER(cuGetErrorString),
          CXLT_MEMBER(cuGetErrorName), CXLT_MEMBER(cuDeviceGetCount), CXLT_MEMBER(cuDeviceGet),
          CXLT_MEMBER(cuDeviceGetName), CXLT_MEMBER(cuDeviceGetAttribute), CXLT_MEMBER(cuDeviceTotalMem),
          CXLT_MEMBER(cuDeviceGetPCIBusId), CXLT_MEMBER(cuDevicePrimaryCtxRetain),
          CXLT_MEMBER(cuDevicePrimaryCtxRelease), CXLT_MEMBER(cuCtxPushCurrent), CXLT_MEMBER(cuCtxPopCurrent),
          CXLT_MEMBER(cuMemGetInfo), CXLT_MEMBER(cuMemAlloc), CXLT_MEMBER(cuMemFree), CXLT_MEMBER(cuMemAllocHost),
          CXLT_MEMBER(cuMemFreeHost), CXLT_MEMBER(cuMemHostRegister), CXLT_MEMBER(cuMemHostUnregister),
          CXLT_MEMBER(cuMemHostGetDevicePointer), CXLT_MEMBER(cuMemHostGetFlags), CXLT_MEMBER(cuMemcpyAsync),
          CXLT_MEMBER(cuMemcpyHtoDAsync), CXLT_MEMBER(cuMemcpyDtoHAsync), CXLT_MEMBER(cuMemcpyDtoDAsync),
          CXLT_MEMBER(cuStreamCreate), CXLT_MEMBER(cuStreamDestroy), CXLT_MEMBER(cuStreamSynchronize),
          CXLT_MEMBER(cuStreamWaitEvent), CXLT_MEMBER(cuEventCreate), CXLT_MEMBER(cuEventRecord),
          CXLT_MEMBER(cuEventSynchronize), CXLT_MEMBER(cuEventQuery), CXLT_MEMBER(cuEventDestroy),
          CXLT_MEMBER(cuEventElapsedTime), CXLT_MEMBER(cuModuleLoadData), CXLT_MEMBER(cuModuleUnload),
          CXLT_MEMBER(cuModuleGetFunction), CXLT_MEMBER(cuLaunchKernel)};
}
#undef CXLT_MEMBER

}  // namespace

const std::vector<DriverSymbol> &driver_symbols() {
  static const std::vector<DriverSymbol> symbols = {
      {"cuInit", {"cuInit"}},
      {"cuDriverGetVersion", {"cuDriverGetVersion"}},
      {"cuGetErrorString", {"cuGetErrorString"}},
      {"cuGetErrorName", {"cuGetErrorName"}},
      {"cuDeviceGetCount", {"cuDeviceGetCount"}},
      {"cuDeviceGet", {"cuDeviceGet"}},
      {"cuDeviceGetName", {"cuDeviceGetName"}},
      {"cuDeviceGetAttribute", {"cuDeviceGetAttribute"}},
      {"cuDeviceTotalMem", {"cuDeviceTotalMem_v2"}},
      {"cuDeviceGetPCIBusId", {"cuDeviceGetPCIBusId"}},
      {"cuDevicePrimaryCtxRetain", {"cuDevicePrimaryCtxRetain"}},
      {"cuDevicePrimaryCtxRelease", {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}},
      {"cuCtxPushCurrent", {"cuCtxPushCurrent_v2"}},
      {"cuCtxPopCurrent", {"cuCtxPopCurrent_v2"}},
      {"cuMemGetInfo", {"cuMemGetInfo_v2"}},
      {"cuMemAlloc", {"cuMemAlloc_v2"}},
      {"cuMemFree", {"cuMemFree_v2"}},
      {"cuMemAllocHost", {"cuMemAllocHost_v2"}},
      {"cuMemFreeHost", {"cuMemFreeHost"}},
      {"cuMemHostRegister", {"cuMemHostRegister_v2"}},
      {"cuMemHostUnregister", {"cuMemHostUnregister"}},
      {"cuMemHostGetDevicePointer", {"cuMemHostGetDevicePointer_v2"}},
      {"cuMemHostGetFlags", {"cuMemHostGetFlags"}},
      {"cuMemcpyAsync", {"cuMemcpyAsync"}},
      {"cuMemcpyHtoDAsync", {"cuMemcpyHtoDAsync_v2"}},
      {"cuMemcpyDtoHAsync", {"cuMemcpyDtoHAsync_v2"}},
      {"cuMemcpyDtoDAsync", {"cuMemcpyDtoDAsync_v2"}},
      {"cuStreamCreate", {"cuStreamCreate"}},
      {"cuStreamDestroy", {"cuStreamDestroy_v2"}},
      {"cuStreamSynchronize", {"cuStreamSynchronize"}},
      {"cuStreamWaitEvent", {"cuStreamWaitEvent"}},
      {"cuEventCreate", {"cuEventCreate"}},
      {"cuEventRecord", {"cuEventRecord"}},
      {"cuEventSynchronize", {"cuEventSynchronize"}},
      {"cuEventQuery", {"cuEventQuery"}},
      {"cuEventDestroy", {"cuEventDestroy_v2"}},
      {"cuEventElapsedTime", {"cuEventElapsedTime", "cuEventElapsedTime_v2"}},
      {"cuModuleLoadData", {"cuModuleLoadData"}},
      {"cuModuleUnload", {"cuModuleUnload"}},
      {"cuModuleGetFunction", {"cuModuleGetFunction"}},
      {"cuLaunchKernel", {"cuLaunchKernel"}},
  };
  return symbols;
}

std::string result_string(const DriverApi *api, CUresult r) {
  std::string s;
  const char *name = nullptr, *text = nullptr;
  if (api && api->cuGetErrorName && api->cuGetErrorName(r, &name) != kSuccess) name = nullptr;
  if (api && api->cuGetErrorString && api->cuGetErrorString(r, &text) != kSuccess) text = nullptr;
  if (name == nullptr) name = known_result_name(r);
  s = name ? name : "CUDA error";
  s += " (" + std::to_string(r) + ")";
  if (text) s += std::string(": ") + text;
  if (const char *hint = known_result_hint(r)) s += std::string(text ? "; " : ": ") + hint;
  return s;
}

DriverLoad load_driver(const std::string &path) {
  DriverLoad out;
  out.path = path;
  dlerror();
  void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char *e = dlerror();
    out.why = "the CUDA driver could not be loaded: " + std::string(e ? e : path + ": dlopen failed") +
              " (no NVIDIA driver on this machine, or it is not on the loader's path)";
    return out;
  }
  DriverApi api{};
  const std::vector<DriverSymbol> &symbols = driver_symbols();
  std::vector<Slot> slots = member_slots(&api);
  for (size_t i = 0; i < symbols.size(); ++i) {
    void *fn = nullptr;
    for (const char *name : symbols[i].names) {
      if (name == nullptr) break;
      fn = dlsym(lib, name);
      if (fn) break;
    }
    if (fn == nullptr) out.missing.emplace_back(symbols[i].names[0]);
    *slots[i].where = fn;
  }
  if (!out.missing.empty()) {
    out.why = "the library " + path + " is not a usable CUDA driver: it lacks ";
    for (size_t i = 0; i < out.missing.size(); ++i) out.why += (i ? ", " : "") + out.missing[i];
    return out;  // the handle stays open: dlclose of a half-driver gains nothing
  }
  out.init_result = api.cuInit(0);
  if (out.init_result != kSuccess) {
    out.why = "the CUDA driver " + path + " loaded but cuInit failed: " + result_string(&api, out.init_result);
    return out;
  }
  int version = 0;
  if (api.cuDriverGetVersion(&version) == kSuccess) out.driver_version = version;
  out.api = api;
  out.ok = true;
  return out;
}

const DriverLoad &driver() {
  static const DriverLoad loaded = [] {
    const char *env = std::getenv("CXLT_CUDA_DRIVER");
    return load_driver(env && *env ? std::string(env) : std::string("libcuda.so.1"));
  }();
  return loaded;
}

ScopedContext::ScopedContext(const DriverApi &api, CUcontext ctx) noexcept
    : api_(api), result_(api.cuCtxPushCurrent(ctx)) {}

ScopedContext::~ScopedContext() {
  if (result_ == kSuccess) {
    CUcontext popped = nullptr;
    api_.cuCtxPopCurrent(&popped);
  }
}

}  // namespace cxltier::cuda
