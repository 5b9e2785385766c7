#pragma once
// Shared between the sim backend's runtime (sim_runtime.cpp) and kernels (sim_kernels.cpp).
#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>

namespace harness::sim {

c10::Allocator* device_allocator();
// Grows or shrinks a sim storage in place (new device memory, contents kept up to the new size).
void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes);
// Registers the sim kernels and the boxed fallback with the dispatcher (called by initialize()).
void register_kernels();

}  // namespace harness::sim
