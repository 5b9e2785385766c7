// bench: runs named scenarios, writes reports, evaluates gates. See README.md.
#include "bench/cli.h"

int main(int argc, char** argv) { return harness::bench_main(argc, argv); }
