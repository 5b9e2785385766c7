#include "harness/interrupt.h"

#include <signal.h>

#include <atomic>

namespace harness {
namespace {

std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (!g_stop_signal.compare_exchange_strong(none, sig)) {
    // The second signal: the user insists. Default action (the process dies of the signal).
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

}  // namespace

namespace {
std::atomic<bool> g_installed{false};
}  // namespace

bool stop_handlers_installed() noexcept { return g_installed.load(std::memory_order_relaxed); }

void install_stop_handlers() {
  g_installed.store(true);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  ::sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a read or write in progress finishes; the run stops at a check
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() noexcept { return g_stop_signal.load(std::memory_order_relaxed); }

void throw_if_stopped() {
  if (const int sig = stop_signal()) throw Interrupted{sig};
}

const char* signal_name(int signal) noexcept {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGKILL: return "SIGKILL";
    case SIGSTOP: return "SIGSTOP";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    default: return "a signal";
  }
}

}  // namespace harness
