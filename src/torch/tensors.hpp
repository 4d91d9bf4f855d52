// Conversions between torch and mcr: element types, reduce operators, contiguous staging.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <mcr/comm/tensor.hpp>
#include <mcr/comm/types.hpp>

namespace mcr::torch_ext {

/// The mcr element type of a torch dtype, or nullopt for types mcr lacks (int16, ...). bool
/// travels as u8 (one byte, values 0 and 1), a complex type as pairs of its real type (lanes()).
std::optional<mcr::DType> to_mcr_dtype(at::ScalarType t) noexcept;
/// Throws a c10::Error naming the op and the dtype when mcr cannot carry it.
mcr::DType checked_dtype(const at::Tensor& t, const char* op);
/// Throws unless the tensor is a dense tensor of a type mcr carries, on the CPU or (in a build
/// with CUDA) on a CUDA device.
void check_tensor(const at::Tensor& t, const char* op);
/// Throws unless every defined tensor of `ts` is on `device`.
void check_same_device(const std::vector<at::Tensor>& ts, const at::Device& device, const char* op);
/// A c10d reduce operator as mcr runs it; sum and avg on bool are refused with a message.
/// PREMUL_SUM (torch.distributed._make_nccl_premul_sum; FSDP2's reduce-scatter after
/// set_gradient_divide_factor) sums the ranks' inputs each multiplied first by its own rank's
/// factor: the binding multiplies this rank's input when the call is made (as torch's `mul` does,
/// for a CUDA tensor on the caller's current stream) and mcr sums. Only floating-point tensors.
class Reduction {
 public:
  Reduction(const c10d::ReduceOp& op, at::ScalarType dtype, const char* op_name);

  mcr::ReduceOp op() const noexcept { return op_; }
  bool premultiplies() const noexcept { return premultiplies_; }
  /// PREMUL_SUM: `t` times the factor, in a new contiguous tensor (the input stays as it was).
  at::Tensor scaled(const at::Tensor& t) const;
  /// PREMUL_SUM: multiplies `t` by the factor in place (a buffer the result overwrites anyway).
  void scale_in_place(const at::Tensor& t) const;

 private:
  at::Tensor factor_on(const at::Tensor& t) const;

  mcr::ReduceOp op_ = mcr::ReduceOp::sum;
  bool premultiplies_ = false;
  double factor_ = 1.0;
  at::Tensor tensor_factor_;  // PREMUL_SUM with a one-element tensor instead of a number
};

/// mcr elements per element of `t`: 2 for a complex tensor (its real and imaginary parts, as
/// torch.view_as_real lays them out), else 1.
std::size_t lanes(const at::Tensor& t) noexcept;

/// A view of a contiguous tensor (count = numel times lanes). A CUDA tensor's view is ordered on
/// the stream of the operation being issued on this thread (IssueStream).
mcr::Tensor view(const at::Tensor& t);

/// The stream the operation being issued on this thread is ordered on (device_order.hpp), for
/// view(): set by the binding around each issue, null otherwise.
class IssueStream {
 public:
  explicit IssueStream(void* stream) noexcept;
  ~IssueStream();
  IssueStream(const IssueStream&) = delete;
  IssueStream& operator=(const IssueStream&) = delete;
  static void* current() noexcept;

 private:
  void* previous_;
};

/// A tensor the runtime can write into, and where its contents must go afterwards: the user's
/// tensor itself when it is contiguous, else a contiguous scratch copied back on completion.
struct Staged {
  at::Tensor user;
  at::Tensor buffer;
  bool copy_back = false;
  void finish() const;
};
/// `copy_in`: the buffer starts with the tensor's values (in-place operations read them).
Staged stage(const at::Tensor& t, bool copy_in);

/// One contiguous buffer holding `tensors` back to back (same dtype), and the inverse.
at::Tensor flatten(const std::vector<at::Tensor>& tensors);
void unflatten_into(const at::Tensor& flat, const std::vector<at::Tensor>& tensors);

}  // namespace mcr::torch_ext
