// Umbrella header of the communication runtime.
#pragma once

#include "mcr/communicator.hpp"
#include "mcr/errors.hpp"
#include "mcr/flight_recorder.hpp"
#include "mcr/launch.hpp"
#include "mcr/memory.hpp"
#include "mcr/observer.hpp"
#include "mcr/store.hpp"
#include "mcr/tensor.hpp"
#include "mcr/types.hpp"
#include "mcr/work.hpp"
