#include "harness/instrument/phase.h"

#include <atomic>
#include <stdexcept>

#include "harness/instrument/counts.h"
#include "harness/instrument/phase_scope.h"

#if HARNESS_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace harness {
namespace phase_stack {
std::atomic<const Phase*> top{nullptr};  // one stack for the process (phase_scope.h)
std::atomic<bool> per_thread{false};
}  // namespace phase_stack

namespace {
thread_local const Phase* t_top = nullptr;  // or one per thread

void set_top_phase(const Phase* phase) noexcept {
  if (phase_stack::per_thread.load(std::memory_order_relaxed)) {
    t_top = phase;
  } else {
    phase_stack::top.store(phase);
  }
}
std::atomic<uint64_t> g_next_serial{1};
std::atomic<PhaseListener*> g_listeners[kMaxPhaseListeners] = {};

#if HARNESS_HAVE_NVTX
nvtxDomainHandle_t harness_domain() {
  static nvtxDomainHandle_t domain = nvtxDomainCreateA("harness");
  return domain;
}
#endif

void push_range(const char* name) noexcept {
#if HARNESS_HAVE_NVTX
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  nvtxDomainRangePushEx(harness_domain(), &attributes);
#else
  (void)name;
#endif
}

void pop_range() noexcept {
#if HARNESS_HAVE_NVTX
  nvtxDomainRangePop(harness_domain());
#endif
}
}  // namespace

bool phases_are_nvtx_ranges() noexcept { return HARNESS_HAVE_NVTX != 0; }

NvtxRange::NvtxRange(const std::string& name) noexcept { push_range(name.c_str()); }
NvtxRange::~NvtxRange() { pop_range(); }

Phase::Phase(const char* name) noexcept
    : name_(name),
      parent_(phase_stack::innermost()),
      serial_(g_next_serial.fetch_add(1, std::memory_order_relaxed)) {
  set_top_phase(this);
  push_range(name);
  for (auto& slot : g_listeners) {
    if (PhaseListener* l = slot.load()) l->on_phase_begin(name_);
  }
}

Phase::~Phase() {
  for (auto& slot : g_listeners) {
    if (PhaseListener* l = slot.load()) l->on_phase_end(name_);
  }
  pop_range();
  set_top_phase(parent_);
}

void set_phases_per_thread(bool per_thread) noexcept {
  phase_stack::per_thread.store(per_thread, std::memory_order_relaxed);
}

const char* Phase::current_name() noexcept {
  const Phase* top = phase_stack::innermost();
  return top ? top->name_ : kNoPhase;
}

const Phase* phase_stack::this_threads_top() noexcept { return t_top; }

void add_phase_listener(PhaseListener* listener) {
  for (auto& slot : g_listeners) {
    PhaseListener* expected = nullptr;
    if (slot.compare_exchange_strong(expected, listener)) return;
  }
  throw std::length_error("too many phase listeners");
}

void remove_phase_listener(PhaseListener* listener) noexcept {
  for (auto& slot : g_listeners) {
    PhaseListener* expected = listener;
    slot.compare_exchange_strong(expected, nullptr);
  }
}

}  // namespace harness
