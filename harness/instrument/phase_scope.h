#pragma once
// Whose phase an event is in (phase.h). bench keeps one process-wide stack: on a GPU the autograd
// engine runs backward ops on its device thread while the main thread waits inside
// "train.backward", and those ops belong to that phase. The Python side (`python -m
// harness_sim run`) counts a user's program, whose other threads (a loader, a metrics worker)
// are not the main thread's phase; there backward runs on the thread that called it (sim turns
// autograd's device threads off), so it keeps a stack per thread: an event is in the innermost
// phase of the thread it happened on, and a thread that opened none counts under kNoPhase.
namespace harness {

// Switches between one stack for the process (false, the default) and one per thread (true).
// Call it while no phase is open.
void set_phases_per_thread(bool per_thread) noexcept;

}  // namespace harness
