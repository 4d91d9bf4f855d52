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

/// The mcr element type of a torch dtype, or nullopt for types mcr lacks (int16, complex, ...).
/// bool travels as u8 (one byte, values 0 and 1).
std::optional<mcr::DType> to_mcr_dtype(at::ScalarType t) noexcept;
/// Throws a c10::Error naming the op and the dtype when mcr cannot carry it.
mcr::DType checked_dtype(const at::Tensor& t, const char* op);
/// Throws unless the tensor is a dense tensor of a type mcr carries, on the CPU or (in a build
/// with CUDA) on a CUDA device.
void check_tensor(const at::Tensor& t, const char* op);
/// Throws unless every defined tensor of `ts` is on `device`.
void check_same_device(const std::vector<at::Tensor>& ts, const at::Device& device, const char* op);
/// The mcr operator for a c10d one; PREMUL_SUM and sum/avg on bool are refused with a message.
mcr::ReduceOp to_mcr_op(const c10d::ReduceOp& op, at::ScalarType dtype, const char* op_name);

/// A view of a contiguous tensor (count = numel). A CUDA tensor's view is ordered on the stream of
/// the operation being issued on this thread (IssueStream).
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
