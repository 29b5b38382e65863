// Errors cross into Python as exceptions (never exit()): CUDA failures carry file:line.
#pragma once
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace qr {

// Base of every quickreduce failure that is not a caller's bad argument (those are
// std::invalid_argument -> ValueError).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CudaError : public Error {
 public:
  using Error::Error;
};

// A wait in a kernel gave up: a peer did not arrive in time. The communicator is unusable after it.
class PeerTimeoutError : public Error {
 public:
  using Error::Error;
};

inline void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess)
    throw CudaError(std::string(what) + " failed: " + cudaGetErrorString(e) + " (" + file + ":" + std::to_string(line) + ")");
}

// Ranks made different calls (size, dtype, codec or algorithm) in the same step.
class CallMismatchError : public Error {
 public:
  using Error::Error;
};

// A dynamic all-to-all's device split sizes were bad (negative, more rows than the input, more
// than the output's capacity); the call finished without them (Communicator::all_to_all_dynamic).
class SplitSizeError : public Error {
 public:
  using Error::Error;
};

}  // namespace qr

#define QR_CUDA_CHECK(expr) ::qr::cuda_check((expr), #expr, __FILE__, __LINE__)
