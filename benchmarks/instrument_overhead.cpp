// What the instrument costs: one small op on the CPU, on sim with no collector active, and on sim
// while counting; a phase scope; an event recorded with no collector. Checked by benchmark, not by
// timed tests. Run: ./build/benchmarks/instrument_overhead
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include "harness/instrument/collector.h"
#include "harness/instrument/phase.h"
#include "harness/instrument/sim/sim_device.h"

namespace {

at::Tensor small_tensor(bool on_sim) {
  at::Tensor t = at::ones({64});
  return on_sim ? t.to(harness::sim::device(0)) : t;
}

void BM_AddInplaceCpu(benchmark::State& state) {
  at::Tensor t = small_tensor(false);
  for (auto _ : state) t.add_(1);
}
BENCHMARK(BM_AddInplaceCpu);

void BM_AddInplaceSimNotCounting(benchmark::State& state) {
  at::Tensor t = small_tensor(true);
  for (auto _ : state) t.add_(1);
}
BENCHMARK(BM_AddInplaceSimNotCounting);

void BM_AddInplaceSimCounting(benchmark::State& state) {
  at::Tensor t = small_tensor(true);
  harness::EventCollector collector;
  harness::ScopedCollection scope(collector);
  harness::Phase phase("bench");
  for (auto _ : state) t.add_(1);
}
BENCHMARK(BM_AddInplaceSimCounting);

void BM_ForeachAdd100SimCounting(benchmark::State& state) {
  std::vector<at::Tensor> list;
  for (int i = 0; i < 100; ++i) list.push_back(small_tensor(true));
  harness::EventCollector collector;
  harness::ScopedCollection scope(collector);
  for (auto _ : state) at::_foreach_add_(list, 1.0);
}
BENCHMARK(BM_ForeachAdd100SimCounting);

void BM_PhaseScope(benchmark::State& state) {
  for (auto _ : state) {
    harness::Phase phase("bench.phase");
    benchmark::DoNotOptimize(harness::Phase::current_name());
  }
}
BENCHMARK(BM_PhaseScope);

void BM_EventWithNoCollector(benchmark::State& state) {
  for (auto _ : state) harness::events::record_launch("aten::add_");
}
BENCHMARK(BM_EventWithNoCollector);

}  // namespace

int main(int argc, char** argv) {
  harness::sim::initialize();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
