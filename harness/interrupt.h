#pragma once
// SIGINT and SIGTERM stop a run cleanly: the handler only notes the signal; the run stops at its
// next check (each training step, each variant, each scenario), unwinds (temporary directories
// removed, no report or trace written) and bench exits 128 + the signal (130, 143), as shells and
// CI runners expect. A second signal while stopping takes the default action at once.
namespace harness {

// Thrown at a check after a stop signal. Deliberately not a std::exception: the per-variant and
// per-scenario handlers record std::exceptions as failures and go on; this must reach bench_main.
struct Interrupted {
  int signal;
  int exit_code() const { return 128 + signal; }
};

// Installs the SIGINT and SIGTERM handlers (idempotent).
void install_stop_handlers();

// Whether install_stop_handlers() ran in this process (bench does; a Python program using the
// sim backend has its own handling, and never sees Interrupted).
bool stop_handlers_installed() noexcept;

// The stop signal received so far, 0 if none. Async-signal-safe to read.
int stop_signal() noexcept;

// Throws Interrupted if a stop signal has been received.
void throw_if_stopped();

// "SIGINT", "SIGTERM", "SIGKILL", "SIGSTOP", "SIGSEGV", "SIGABRT", or "a signal".
const char* signal_name(int signal) noexcept;

}  // namespace harness
