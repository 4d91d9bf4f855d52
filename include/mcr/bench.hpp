// The benchmark and tuning library (mcr::bench, target mcr::bench) behind `mcr bench` and
// `mcr tune`: nccl-tests bandwidth conventions, verifiable buffers for every operation, timed and
// interleaved loops, sweeps, trace replay, the comparison of automatic selection with every
// backend, and tuning tables. This umbrella header includes every part. See docs/bench.md.
#pragma once

#include "mcr/bench/bandwidth.hpp"
#include "mcr/bench/compare.hpp"
#include "mcr/bench/measure.hpp"
#include "mcr/bench/point.hpp"
#include "mcr/bench/provenance.hpp"
#include "mcr/bench/refine.hpp"
#include "mcr/bench/replay.hpp"
#include "mcr/bench/sweep.hpp"
#include "mcr/bench/table.hpp"
#include "mcr/bench/tune.hpp"
