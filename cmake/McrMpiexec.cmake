# The one set of mpiexec flags for every multi-rank test and benchmark that ctest runs: ranks
# oversubscribe a small host (--oversubscribe, --bind-to none, idle ranks yield the core instead of
# spinning) and talk through shared memory (one host); root may run them (containers, CI).
# Included by tests/CMakeLists.txt and perf/ at configure time and by the `cmake -P` scripts
# that launch ranks themselves, so a change here reaches them all.
set(MCR_MPIEXEC_FLAGS --oversubscribe --bind-to none --allow-run-as-root --mca mpi_yield_when_idle
                      1 --mca btl self,vader)
