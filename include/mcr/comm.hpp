// Umbrella header of the communication runtime: every public header under mcr/comm/, and the
// errors every mcr library raises.
#pragma once

#include "mcr/comm/bandwidth.hpp"
#include "mcr/comm/comm_log.hpp"
#include "mcr/comm/communicator.hpp"
#include "mcr/comm/device_buffer.hpp"
#include "mcr/comm/flight_analysis.hpp"
#include "mcr/comm/flight_recorder.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/comm/launch.hpp"
#include "mcr/comm/memory.hpp"
#include "mcr/comm/observer.hpp"
#include "mcr/comm/selection.hpp"
#include "mcr/comm/store.hpp"
#include "mcr/comm/tensor.hpp"
#include "mcr/comm/types.hpp"
#include "mcr/comm/work.hpp"
#include "mcr/errors.hpp"
