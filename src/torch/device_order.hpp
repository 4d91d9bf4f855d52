// CUDA tensors in the binding: where an operation on them is ordered, and what a build without
// CUDA says about them. One implementation per build (cuda_streams.cpp or no_cuda_streams.cpp,
// chosen in CMake), so that no device #if reaches the rest of the binding.
#pragma once

#include <ATen/ATen.h>

#include <functional>

namespace mcr::torch_ext {

/// Whether this build handles CUDA tensors.
bool cuda_tensors_supported() noexcept;

/// The stream an operation on `t` is ordered on, decided on the posting thread: nullptr for a CPU
/// tensor. For a CUDA tensor, a stream of the binding's own (one per device) that has been made to
/// wait for everything the caller's current stream had queued at this call, as torch's own
/// backends order a collective after the work that produced its inputs. The runtime then orders
/// the operation after that stream (mcr::Tensor's stream), whenever the communication thread
/// issues it. Throws a c10::Error for a CUDA tensor in a build without CUDA.
void* order_after_current_stream(const at::Tensor& t, const char* op);

/// Runs `copy_back` (the copy of an operation's staged result into the caller's tensors, on the
/// thread that completes it) so that it is finished when this returns: for a CUDA tensor `t`, with
/// the current stream of its device a stream of the binding's own that holds nothing else, which
/// is then waited for. The Work completes after this, so a caller reading the result on any stream
/// sees it, and the staging buffers freed then are no longer read. For a CPU tensor (or none), it
/// just runs it.
void run_copy_back(const at::Tensor& t, const std::function<void()>& copy_back);

}  // namespace mcr::torch_ext
