// The extension module quickreduce._C: one register_* per binding file.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

void register_comm(nb::module_& m);
void register_twin(nb::module_& m);

NB_MODULE(_C, m) {
  m.doc() = "quickreduce CUDA core: communicator, kernels and the CPU twin of the codecs";
  register_comm(m);
  register_twin(m);
}
