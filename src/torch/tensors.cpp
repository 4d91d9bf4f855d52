// Conversions between torch and mcr.
#include "tensors.hpp"

#include <c10/util/Exception.h>

#include "device_order.hpp"

namespace mcr::torch_ext {

std::optional<mcr::DType> to_mcr_dtype(at::ScalarType t) noexcept {
  switch (t) {
    case at::kFloat:
      return mcr::DType::f32;
    case at::kDouble:
      return mcr::DType::f64;
    case at::kHalf:
      return mcr::DType::f16;
    case at::kBFloat16:
      return mcr::DType::bf16;
    case at::kChar:
      return mcr::DType::i8;
    case at::kByte:
      return mcr::DType::u8;
    case at::kBool:
      return mcr::DType::u8;
    case at::kInt:
      return mcr::DType::i32;
    case at::kLong:
      return mcr::DType::i64;
    case at::kComplexFloat:  // complex: carried as its real and imaginary parts (lanes())
      return mcr::DType::f32;
    case at::kComplexDouble:
      return mcr::DType::f64;
    default:
      return std::nullopt;
  }
}

mcr::DType checked_dtype(const at::Tensor& t, const char* op) {
  auto d = to_mcr_dtype(t.scalar_type());
  TORCH_CHECK(d.has_value(), "mcr ", op, ": dtype ", t.scalar_type(),
              " is not supported (mcr carries float32, float64, float16, bfloat16, int8, uint8, "
              "bool, int32, int64, and complex64 and complex128 as pairs of floats)");
  return *d;
}

void check_tensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "mcr ", op, ": undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided, "mcr ", op, ": only dense (strided) tensors, got ",
              t.layout());
  TORCH_CHECK(t.device().is_cpu() || (t.device().is_cuda() && cuda_tensors_supported()), "mcr ", op,
              ": ", t.device(), " tensors are not supported",
              t.device().is_cuda() ? " by this build (no CUDA)" : "", "; mcr takes CPU",
              cuda_tensors_supported() ? " and CUDA" : "", " tensors");
  checked_dtype(t, op);
}

void check_same_device(const std::vector<at::Tensor>& ts, const at::Device& device,
                       const char* op) {
  for (const auto& t : ts) {
    TORCH_CHECK(!t.defined() || t.device() == device, "mcr ", op,
                ": all tensors must be on one device, got ", device, " and ", t.device());
  }
}

namespace {
thread_local void* g_issue_stream = nullptr;
}  // namespace

IssueStream::IssueStream(void* stream) noexcept : previous_(g_issue_stream) {
  g_issue_stream = stream;
}
IssueStream::~IssueStream() {
  g_issue_stream = previous_;
}
void* IssueStream::current() noexcept {
  return g_issue_stream;
}

namespace {

mcr::ReduceOp plain_op(c10d::ReduceOp::RedOpType op, const char* op_name) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return mcr::ReduceOp::sum;
    case c10d::ReduceOp::AVG:
      return mcr::ReduceOp::avg;
    case c10d::ReduceOp::PRODUCT:
      return mcr::ReduceOp::prod;
    case c10d::ReduceOp::MIN:
      return mcr::ReduceOp::min;
    case c10d::ReduceOp::MAX:
      return mcr::ReduceOp::max;
    case c10d::ReduceOp::BAND:
      return mcr::ReduceOp::band;
    case c10d::ReduceOp::BOR:
      return mcr::ReduceOp::bor;
    case c10d::ReduceOp::BXOR:
      return mcr::ReduceOp::bxor;
    default:
      break;
  }
  TORCH_CHECK(false, "mcr ", op_name, ": reduce op ", static_cast<int>(op), " is not supported");
  return mcr::ReduceOp::sum;  // not reached
}

}  // namespace

Reduction::Reduction(const c10d::ReduceOp& op, at::ScalarType dtype, const char* op_name) {
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    TORCH_CHECK(at::isFloatingType(dtype) || at::isComplexType(dtype), "mcr ", op_name,
                ": PREMUL_SUM multiplies by a floating-point factor, the tensor is ", dtype,
                "; use SUM and scale the result");
    const auto* supplement =
        dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(supplement != nullptr, "mcr ", op_name,
                ": PREMUL_SUM without its factor (make it with "
                "torch.distributed._make_nccl_premul_sum)");
    premultiplies_ = true;
    if (supplement->tensor_factor.defined()) {
      TORCH_CHECK(supplement->tensor_factor.numel() == 1, "mcr ", op_name,
                  ": the PREMUL_SUM factor must have one element, it has ",
                  supplement->tensor_factor.numel());
      tensor_factor_ = supplement->tensor_factor.reshape({});
    } else {
      factor_ = supplement->double_factor;
    }
    return;  // a sum of the scaled inputs
  }
  op_ = plain_op(op.op_, op_name);
  // A complex tensor travels as its real and imaginary parts: only operators that act on each
  // part alone carry over (as torch allows for NCCL: isComplexViewAsRealAllowed).
  TORCH_CHECK(!at::isComplexType(dtype) || op_ == mcr::ReduceOp::sum || op_ == mcr::ReduceOp::avg,
              "mcr ", op_name, ": reduce op ", mcr::to_string(op_), " is not defined on ", dtype,
              " tensors; complex tensors take SUM, AVG and PREMUL_SUM");
  // bool travels as bytes 0/1: sum and avg would leave values other than 0 and 1.
  TORCH_CHECK(dtype != at::kBool || (op_ != mcr::ReduceOp::sum && op_ != mcr::ReduceOp::avg),
              "mcr ", op_name,
              ": SUM and AVG of bool tensors are not supported; use MAX (logical "
              "or) or MIN (logical and)");
}

// A factor given as a tensor may live on another device than the input: a CUDA input takes a CPU
// scalar as it is, a CPU input needs the value on the CPU.
at::Tensor Reduction::factor_on(const at::Tensor& t) const {
  if (tensor_factor_.device() == t.device() || tensor_factor_.device().is_cpu()) {
    return tensor_factor_;
  }
  return tensor_factor_.to(t.device());
}

at::Tensor Reduction::scaled(const at::Tensor& t) const {
  if (!premultiplies_) return t;
  return (tensor_factor_.defined() ? t.mul(factor_on(t)) : t.mul(factor_)).contiguous();
}

void Reduction::scale_in_place(const at::Tensor& t) const {
  if (!premultiplies_) return;
  if (tensor_factor_.defined()) {
    t.mul_(factor_on(t));
  } else {
    t.mul_(factor_);
  }
}

std::size_t lanes(const at::Tensor& t) noexcept {
  return t.is_complex() ? 2 : 1;
}

mcr::Tensor view(const at::Tensor& t) {
  const auto count = static_cast<std::size_t>(t.numel()) * lanes(t);
  if (t.device().is_cuda()) {
    return mcr::Tensor(t.data_ptr(), count, *to_mcr_dtype(t.scalar_type()),
                       mcr::Device::cuda(t.get_device()), IssueStream::current());
  }
  return mcr::Tensor(t.data_ptr(), count, *to_mcr_dtype(t.scalar_type()));
}

void Staged::finish() const {
  if (copy_back) user.copy_(buffer.view(user.sizes()));
}

Staged stage(const at::Tensor& t, bool copy_in) {
  if (t.is_contiguous()) return Staged{t, t, false};
  at::Tensor buf = copy_in ? t.contiguous() : at::empty(t.sizes(), t.options());
  return Staged{t, buf, true};
}

at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const auto& t : tensors)
    flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void unflatten_into(const at::Tensor& flat, const std::vector<at::Tensor>& tensors) {
  std::int64_t offset = 0;
  for (const auto& t : tensors) {
    const auto n = t.numel();
    t.copy_(flat.narrow(0, offset, n).view(t.sizes()));
    offset += n;
  }
}

}  // namespace mcr::torch_ext
