#pragma once
// bench_main: the bench command line. Parses flags, runs the chosen scenarios, writes the
// reports and evaluates the gates. The one top-level catch: bad input exits 2 with a message.
namespace harness {
int bench_main(int argc, char** argv);
}  // namespace harness
