#pragma once
// CUDA's random number generators under serve_cuda() (cuda_generator.cpp): Philox's (seed,
// offset) state, and the draw a random op on a CUDA tensor makes from it.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

namespace c10 {
class OperatorHandle;
struct FunctionSchema;
}  // namespace c10

namespace harness::sim {

// The default generator of CUDA device `index` (-1: the current one), and a new one.
const at::Generator& default_cuda_generator(c10::DeviceIndex index);
at::Generator new_cuda_generator(c10::DeviceIndex index);

// Whether `op` draws random numbers (native_functions.yaml's nondeterministic_seeded tag).
bool draws_random_numbers(const c10::OperatorHandle& op);

// For the call of a random op on CUDA device `device` whose arguments are on `stack`: the CUDA
// generator it names (or the device's default) advances by the op's Philox offset, and the op
// draws from a host generator seeded by the state it had -- given in the generator argument, or,
// for an op without one, as the host's default generator's seed until this object is destroyed.
class CudaRandomDraw {
 public:
  CudaRandomDraw(const c10::FunctionSchema& schema, torch::jit::Stack* stack, c10::Device device);
  ~CudaRandomDraw();
  CudaRandomDraw(const CudaRandomDraw&) = delete;
  CudaRandomDraw& operator=(const CudaRandomDraw&) = delete;

 private:
  at::Tensor saved_host_state_;
};

}  // namespace harness::sim
