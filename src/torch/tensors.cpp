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
    default:
      return std::nullopt;
  }
}

mcr::DType checked_dtype(const at::Tensor& t, const char* op) {
  auto d = to_mcr_dtype(t.scalar_type());
  TORCH_CHECK(d.has_value(), "mcr ", op, ": dtype ", t.scalar_type(),
              " is not supported (mcr carries float32, float64, float16, bfloat16, int8, uint8, "
              "bool, int32, int64)");
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

mcr::ReduceOp to_mcr_op(const c10d::ReduceOp& op, at::ScalarType dtype, const char* op_name) {
  mcr::ReduceOp out = mcr::ReduceOp::sum;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      out = mcr::ReduceOp::sum;
      break;
    case c10d::ReduceOp::AVG:
      out = mcr::ReduceOp::avg;
      break;
    case c10d::ReduceOp::PRODUCT:
      out = mcr::ReduceOp::prod;
      break;
    case c10d::ReduceOp::MIN:
      out = mcr::ReduceOp::min;
      break;
    case c10d::ReduceOp::MAX:
      out = mcr::ReduceOp::max;
      break;
    case c10d::ReduceOp::BAND:
      out = mcr::ReduceOp::band;
      break;
    case c10d::ReduceOp::BOR:
      out = mcr::ReduceOp::bor;
      break;
    case c10d::ReduceOp::BXOR:
      out = mcr::ReduceOp::bxor;
      break;
    default:
      TORCH_CHECK(false, "mcr ", op_name, ": reduce op ", static_cast<int>(op.op_),
                  " (PREMUL_SUM or unknown) is not supported");
  }
  // bool travels as bytes 0/1: sum and avg would leave values other than 0 and 1.
  TORCH_CHECK(dtype != at::kBool || (out != mcr::ReduceOp::sum && out != mcr::ReduceOp::avg),
              "mcr ", op_name,
              ": SUM and AVG of bool tensors are not supported; use MAX (logical "
              "or) or MIN (logical and)");
  return out;
}

mcr::Tensor view(const at::Tensor& t) {
  if (t.device().is_cuda()) {
    return mcr::Tensor(t.data_ptr(), static_cast<std::size_t>(t.numel()),
                       *to_mcr_dtype(t.scalar_type()), mcr::Device::cuda(t.get_device()),
                       IssueStream::current());
  }
  return mcr::Tensor(t.data_ptr(), static_cast<std::size_t>(t.numel()),
                     *to_mcr_dtype(t.scalar_type()));
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
