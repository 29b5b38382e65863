#include "transport/ipc.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <stdexcept>

#include "comm/status.hpp"

namespace qr {

static_assert(sizeof(cudaIpcMemHandle_t) == kIpcHandleBytes, "IPC handle size");

std::string export_ipc_handle(void* device_ptr) {
  cudaIpcMemHandle_t h;
  QR_CUDA_CHECK(cudaIpcGetMemHandle(&h, device_ptr));
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
}

void* open_ipc_handle(const std::string& handle) {
  if (handle.size() != kIpcHandleBytes)
    throw std::invalid_argument("peer handle has " + std::to_string(handle.size()) + " bytes, expected " +
                                std::to_string(kIpcHandleBytes));
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.data(), sizeof(h));
  void* ptr = nullptr;
  QR_CUDA_CHECK(cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess));
  return ptr;
}

void close_ipc_handle(void* mapped_ptr) {
  if (mapped_ptr) cudaIpcCloseMemHandle(mapped_ptr);  // best effort at teardown
}

}  // namespace qr
