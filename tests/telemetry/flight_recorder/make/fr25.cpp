// Records entries into PyTorch 2.5's own flight recorder (NCCLTraceBuffer, compiled into libtorch_cuda.so with its
// symbols not exported) so that the release's own `_dump_nccl_trace()` and `_dump_nccl_trace_json()` write them. The
// recorder's functions are reached from an exported neighbour: the build passes their offsets from that library's
// symbol table (build.py), so what runs is the release's compiled code. No GPU is needed: an event that was never
// recorded reads as done.
#include <dlfcn.h>
#include <fstream>
#include <torch/extension.h>
#include <ATen/cuda/CUDAEvent.h>
#include <torch/csrc/distributed/c10d/Utils.hpp>
#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>
#include <deque>

namespace {
using Buffer = c10d::NCCLTraceBuffer;
using Event = at::cuda::CUDAEvent;
using GetFn = Buffer* (*)();
using RecordFn = std::optional<size_t> (*)(
    Buffer*, size_t, const std::tuple<std::string, std::string>&, size_t, size_t, size_t, std::string,
    const std::vector<at::Tensor>&, const std::vector<at::Tensor>&, Event*, Event*, std::chrono::milliseconds,
    std::shared_ptr<c10d::ProcessGroupStatus>, bool);
using RetireFn = void (*)(Buffer*, std::optional<size_t>, bool);
using RanksFn = void (*)(Buffer*, const std::tuple<std::string, std::string>&, std::vector<uint64_t>);

std::deque<Event> events;
std::map<std::string, std::shared_ptr<c10d::ProcessGroupStatus>> statuses;
char* base = nullptr;
int64_t anchor = 0;

template <typename F>
F at_offset(int64_t offset) {
  return reinterpret_cast<F>(base + (offset - anchor));
}

Event* fresh() {
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

int64_t get_at = 0, record_at = 0, retire_at = 0, ranks_at = 0;
} // namespace

void locate(const std::string& library, int64_t anchor_offset, int64_t get, int64_t record, int64_t retire,
            int64_t ranks) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  TORCH_CHECK(handle != nullptr, library, " is not loaded");
  void* exported = dlsym(handle, "_ZN4c10d15dump_nccl_traceEbbb");
  TORCH_CHECK(exported != nullptr, "c10d::dump_nccl_trace is not loaded");
  base = static_cast<char*>(exported);
  anchor = anchor_offset;
  get_at = get;
  record_at = record;
  retire_at = retire;
  ranks_at = ranks;
}

int64_t record(int64_t pg_id, const std::string& name, const std::string& desc, int64_t seq, int64_t p2p_seq,
               int64_t op_id, const std::string& op, const std::vector<std::vector<int64_t>>& in_sizes,
               const std::vector<std::vector<int64_t>>& out_sizes, const std::string& dtype, const std::string& state,
               bool retired, bool p2p) {
  Event* start = state == "scheduled" ? nullptr : fresh();
  Event* end = state == "completed" ? fresh() : nullptr;
  auto& status = statuses[name];
  if (!status) {
    status = std::make_shared<c10d::ProcessGroupStatus>();
  }
  status->lastEnqueuedSeq = p2p ? p2p_seq : seq;
  if (state == "completed") {
    status->lastCompletedSeq = p2p ? p2p_seq : seq;
  }
  Buffer* buffer = at_offset<GetFn>(get_at)();
  auto id = at_offset<RecordFn>(record_at)(
      buffer, pg_id, std::make_tuple(name, desc), seq, p2p_seq, op_id, op, tensors(in_sizes, dtype),
      tensors(out_sizes, dtype), start, end, std::chrono::milliseconds(600000), status, p2p);
  if (retired) {
    at_offset<RetireFn>(retire_at)(buffer, id, false);
  }
  return id.has_value() ? static_cast<int64_t>(*id) : -1;
}

void pg_ranks(const std::string& name, const std::string& desc, const std::vector<uint64_t>& ranks) {
  at_offset<RanksFn>(ranks_at)(at_offset<GetFn>(get_at)(), std::make_tuple(name, desc), ranks);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("locate", &locate);
  m.def("record", &record);
  m.def("pg_ranks", &pg_ranks);
}
