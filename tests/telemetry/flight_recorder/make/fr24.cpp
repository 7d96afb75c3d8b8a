// Records entries into PyTorch 2.4's own flight recorder (NCCLTraceBuffer, header-only in that release) and dumps
// them with its own pickler: no GPU is needed, because an event that was never recorded reads as done.
#include <fstream>
#include <torch/extension.h>
#include <ATen/cuda/CUDAEvent.h>
#include <torch/csrc/distributed/c10d/Utils.hpp>
#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>
#include <torch/csrc/distributed/c10d/TraceUtils.h>
#include <deque>

namespace {
std::deque<at::cuda::CUDAEvent> events;

at::cuda::CUDAEvent* fresh() {
  events.emplace_back();
  return &events.back();
}

std::vector<at::Tensor> tensors(const std::vector<std::vector<int64_t>>& sizes, const std::string& dtype) {
  auto type = dtype == "Double" ? at::kDouble : dtype == "BFloat16" ? at::kBFloat16 : at::kFloat;
  std::vector<at::Tensor> out;
  for (const auto& s : sizes) {
    out.push_back(at::empty(s, at::TensorOptions().device(at::kMeta).dtype(type)));
  }
  return out;
}
} // namespace

int64_t record(int64_t pg_id, const std::string& name, const std::string& desc, int64_t seq, int64_t p2p_seq,
               int64_t op_id, const std::string& op, const std::vector<std::vector<int64_t>>& in_sizes,
               const std::vector<std::vector<int64_t>>& out_sizes, const std::string& dtype, const std::string& state,
               bool retired, bool p2p) {
  at::cuda::CUDAEvent* start = state == "scheduled" ? nullptr : fresh();
  at::cuda::CUDAEvent* end = state == "completed" ? fresh() : nullptr;
  auto id = c10d::NCCLTraceBuffer::get()->record(
      pg_id, std::make_tuple(name, desc), seq, p2p_seq, op_id, op, tensors(in_sizes, dtype), tensors(out_sizes, dtype),
      start, end, p2p);
  if (retired) {
    c10d::NCCLTraceBuffer::get()->retire_id(id, false);
  }
  return id.has_value() ? static_cast<int64_t>(*id) : -1;
}

void pg_ranks(const std::string& name, const std::string& desc, const std::vector<uint64_t>& ranks) {
  c10d::NCCLTraceBuffer::get()->record_pg_ranks(std::make_tuple(name, desc), ranks);
}

py::bytes dump(bool stacks, bool only_active) {
  return py::bytes(c10d::NCCLTraceBuffer::get()->dump(std::nullopt, true, stacks, only_active));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("record", &record);
  m.def("pg_ranks", &pg_ranks);
  m.def("dump", &dump);
}
