// ProcessGroupGloo.hpp pulls in gloo's and c10d's heaviest headers. The gloo headers come from
// Debian's libgloo-dev; only opaque gloo types are used here (the PyTorch wheel ships gloo inside
// libtorch_cpu but not its headers), so no gloo code is compiled into the harness.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO  // as torch's own build defines it: the header is empty without it
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdlib>

#include "harness/runtime/dist/counting_backend.h"

namespace harness::runtime {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else {
    const char* addr = std::getenv("MASTER_ADDR");
    const std::string host = addr != nullptr && *addr != '\0' ? addr : "127.0.0.1";
    const bool loopback = host == "127.0.0.1" || host == "localhost";
    options->devices.push_back(loopback
                                   ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                   : c10d::ProcessGroupGloo::createDefaultDevice());
  }
  options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace harness::runtime
