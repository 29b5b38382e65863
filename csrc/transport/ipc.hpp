// CUDA IPC for the workspace: export this process's allocation as bytes, map peers' from bytes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qr {

constexpr size_t kIpcHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t)

std::string export_ipc_handle(void* device_ptr);
void* open_ipc_handle(const std::string& handle);  // maps with lazy peer access
void close_ipc_handle(void* mapped_ptr);

}  // namespace qr
