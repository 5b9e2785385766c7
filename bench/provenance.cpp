#include "bench/provenance.h"

#include <sched.h>
#include <torch/headeronly/version.h>
#include <unistd.h>

#include <ctime>

#include "bench/git_info.h"

namespace harness {
namespace {

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 0;
}

static std::string host_name() {
  char buf[256] = {0};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown";
}

Provenance make_provenance(const BenchOptions& o, const runtime::DeviceSelection& device,
                           const Instrument& instrument) {
  Provenance p;
  p.tool_version = HARNESS_VERSION;
  p.git_sha = git_sha();
  p.git_dirty = git_dirty();
  p.argv = o.argv;
  p.build_type = HARNESS_BUILD_TYPE;
  p.libtorch_version = TORCH_VERSION;
  p.device = runtime::to_string(device.kind);
  p.device_name = device.description;
  p.compute = o.compute;
  p.cuda_version = runtime::cuda_runtime_version();
  p.cupti_version = instrument.version();
  p.instrument = instrument.name();
  p.instrument_status = instrument.status();
  p.hostname = host_name();
  p.started_at = utc_now();
  p.process_id = new_process_id();
  return p;
}

std::vector<std::string> trust_warnings(const BenchOptions& o,
                                        const runtime::DeviceSelection& device,
                                        const Instrument& instrument) {
  std::vector<std::string> w;
  if (device.kind == runtime::DeviceKind::Sim) {
    w.push_back("simulated device: copies, syncs and launches follow CUDA's rules; times are "
                "host CPU times, not GPU times");
  }
  if (o.compute == "shapes") {
    w.push_back("--compute shapes: no op computed its values (meta functions only); every value "
                "the host read is a placeholder (events value_not_computed name where), and "
                "times are not an op's times");
  }
  if (!instrument.available()) {
    w.push_back("instrument " + instrument.name() + " " + instrument.status() +
                ": counts are null, not measured");
  }
  if (std::string(HARNESS_BUILD_TYPE) == "Debug") {
    w.push_back("debug build: times are not representative");
  }
  if (o.run.steps > 0 && o.run.steps < 5) {
    w.push_back("fewer than 5 measured steps: time statistics are weak");
  }
  if (o.run.preset == "seed" && device.kind != runtime::DeviceKind::Cuda) {
    w.push_back("the seed preset has the original report's sizes and is meant for a GPU; on " +
                std::string(runtime::to_string(device.kind)) + " it is slow");
  }
  return w;
}

}  // namespace harness
