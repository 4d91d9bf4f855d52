#!/usr/bin/env bash
# The cost of writing libnbc's variable (cvar_write_cost.c), one process on this host; output in
# cvar_write_cost.txt next to this script.
set -euo pipefail
cd "$(dirname "$0")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc -O2 -Wall -o /tmp/mcr_cvar_write_cost cvar_write_cost.c
{ uptime; mpirun -np 1 /tmp/mcr_cvar_write_cost; } > cvar_write_cost.txt 2>&1
cat cvar_write_cost.txt
