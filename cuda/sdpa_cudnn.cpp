// cuda/sdpa_cudnn.h on the cuDNN frontend's graph API.
#include "cuda/sdpa_cudnn.h"

#include <cudnn_frontend.h>

#include <map>
#include <memory>
#include <mutex>

#include "cuda/runtime.h"
#include "cuda/sdpa_graph_key.h"
#include "cuda/stream.h"

namespace reprise::cuda {
namespace {

namespace fe = cudnn_frontend;
using Attributes = fe::graph::Tensor_attributes;

// The graphs' tensor ids.
enum Uid : Attributes::uid_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kSeed, kOffset };

std::string describe(const SdpaGraphKey& key) {
  return std::string(dtype_name(key.dtype)) + " q (" + std::to_string(key.b) + ", " +
         std::to_string(key.hq) + ", " + std::to_string(key.t) + ", " + std::to_string(key.d) +
         "), k/v (" + std::to_string(key.hkv) + " heads, " + std::to_string(key.s) + " keys, Dv " +
         std::to_string(key.dv) + ")" + (key.causal ? ", causal" : "") +
         (key.causal_offset > 0 ? " offset " + std::to_string(key.causal_offset) : "") +
         (key.window > 0 ? ", window " + std::to_string(key.window) : "") +
         (key.dropout_p > 0 ? ", dropout" : "");
}

void check_fe(fe::error_t status, const char* what, Device device, const SdpaGraphKey& key) {
  REPRISE_CHECK(status.is_good(), "scaled_dot_product_attention on ", to_string(device), ": cuDNN ",
                what, " failed for ", describe(key), ": ", status.get_message());
}

void check_cudnn(cudnnStatus_t status, const char* what, Device device) {
  REPRISE_CHECK(status == CUDNN_STATUS_SUCCESS, what, " on ", to_string(device), ": ",
                cudnnGetErrorString(status));
}

// The graphs' tensors' sizes: q (B, Hq, T, D), k (B, Hkv, S, D), v (B, Hkv,
// S, Dv), o and do (B, Hq, T, Dv), stats (B, Hq, T, 1).
using Dims = std::vector<int64_t>;
Dims q_dims(const SdpaGraphKey& k) { return {k.b, k.hq, k.t, k.d}; }
Dims k_dims(const SdpaGraphKey& k) { return {k.b, k.hkv, k.s, k.d}; }
Dims v_dims(const SdpaGraphKey& k) { return {k.b, k.hkv, k.s, k.dv}; }
Dims o_dims(const SdpaGraphKey& k) { return {k.b, k.hq, k.t, k.dv}; }
Dims stats_dims(const SdpaGraphKey& k) { return {k.b, k.hq, k.t, 1}; }

Dims contiguous(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * dims[i];
  return strides;
}
Dims as_vector(const std::array<int64_t, 4>& s) { return {s.begin(), s.end()}; }

// An output of the graph, written contiguously.
Attributes& mark_output(Attributes& t, Attributes::uid_t uid, const Dims& dims) {
  return t.set_output(true).set_uid(uid).set_dim(dims).set_stride(contiguous(dims));
}

// One built graph and the workspace its plan needs.
struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
};

// Per device: a cuDNN handle and every graph built on it, by problem.
class Attention {
 public:
  static Attention& of(Device device) {
    return one_per_device<Attention>(device, [](Device d) { return new Attention(d); });
  }

  // The handle, set to this thread's current stream of the device.
  cudnnHandle_t handle() {
    check_cudnn(cudnnSetStream(handle_, current_stream(device_)), "cudnnSetStream", device_);
    return handle_;
  }

  const Built& graph(const SdpaGraphKey& key) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto found = graphs_.find(key);
    if (found != graphs_.end()) return found->second;
    Built b;
    b.graph = key.backward ? backward_graph(key) : forward_graph(key);
    check_fe(b.graph->build(handle(), {fe::HeurMode_t::A}), "graph build", device_, key);
    check_fe(b.graph->get_workspace_size(b.workspace), "workspace query", device_, key);
    return graphs_.emplace(key, std::move(b)).first->second;
  }

 private:
  explicit Attention(Device device) : device_(device) {
    const DeviceGuard guard(device);
    check_cudnn(cudnnCreate(&handle_), "cudnnCreate", device);
  }

  std::shared_ptr<fe::graph::Graph> new_graph(const SdpaGraphKey& key) const {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(key.dtype == DType::bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
  }

  static std::shared_ptr<Attributes> input(fe::graph::Graph& g, const char* name, Uid uid,
                                           const Dims& dim, const Dims& stride) {
    return g.tensor(Attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride));
  }

  // The dropout's Philox seed and offset: one i64 each, in device memory.
  static std::shared_ptr<Attributes> scalar_i64(fe::graph::Graph& g, const char* name, Uid uid) {
    return g.tensor(Attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({1, 1, 1, 1})
                        .set_stride({1, 1, 1, 1})
                        .set_data_type(fe::DataType_t::INT64));
  }

  template <class Options>
  static void set_mask_and_dropout(fe::graph::Graph& g, const SdpaGraphKey& key, Options& o) {
    o.set_attn_scale(float(key.scale));
    if (key.causal) {
      const CudnnBand band = cudnn_sdpa_band(key);
      o.set_diagonal_alignment(band.bottom_right ? fe::DiagonalAlignment_t::BOTTOM_RIGHT
                                                 : fe::DiagonalAlignment_t::TOP_LEFT)
          .set_diagonal_band_right_bound(int(band.right));
      if (band.left > 0) o.set_diagonal_band_left_bound(int(band.left));
    }
    if (key.dropout_p > 0) {
      o.set_dropout(float(key.dropout_p), scalar_i64(g, "seed", kSeed),
                    scalar_i64(g, "offset", kOffset));
    }
  }

  // The graph's q, k and v, with their strides.
  static std::array<std::shared_ptr<Attributes>, 3> qkv(fe::graph::Graph& g,
                                                        const SdpaGraphKey& key) {
    return {input(g, "q", kQ, q_dims(key), as_vector(key.q_stride)),
            input(g, "k", kK, k_dims(key), as_vector(key.k_stride)),
            input(g, "v", kV, v_dims(key), as_vector(key.v_stride))};
  }

  std::shared_ptr<fe::graph::Graph> forward_graph(const SdpaGraphKey& key) const {
    auto g = new_graph(key);
    const auto [q, k, v] = qkv(*g, key);
    auto options = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true);
    set_mask_and_dropout(*g, key, options);
    auto [o, stats] = g->sdpa(q, k, v, options);
    mark_output(*o, kO, o_dims(key));
    mark_output(*stats, kStats, stats_dims(key)).set_data_type(fe::DataType_t::FLOAT);
    return g;
  }

  std::shared_ptr<fe::graph::Graph> backward_graph(const SdpaGraphKey& key) const {
    auto g = new_graph(key);
    const auto [q, k, v] = qkv(*g, key);
    const auto o = input(*g, "o", kO, o_dims(key), contiguous(o_dims(key)));
    const auto dout = input(*g, "do", kDO, o_dims(key), contiguous(o_dims(key)));
    const auto stats = input(*g, "stats", kStats, stats_dims(key), contiguous(stats_dims(key)));
    stats->set_data_type(fe::DataType_t::FLOAT);
    auto options = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward");
    options.set_deterministic_algorithm(true);
    set_mask_and_dropout(*g, key, options);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, options);
    mark_output(*dq, kDQ, q_dims(key));
    mark_output(*dk, kDK, k_dims(key));
    mark_output(*dv, kDV, v_dims(key));
    return g;
  }

  Device device_;
  cudnnHandle_t handle_ = nullptr;
  std::mutex mutex_;
  std::map<SdpaGraphKey, Built> graphs_;
};

// q, k, v with a contiguous head dimension (cuDNN reads any other strides).
Tensor head_contiguous(const Tensor& t) { return t.stride(3) == 1 ? t : t.contiguous(); }

SdpaGraphKey checked_key(Device device, const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttentionParams& params, bool backward) {
  const SdpaGraphKey key = sdpa_graph_key(q, k, v, params, backward);
  const std::string why = cudnn_sdpa_unsupported(key);
  REPRISE_CHECK(why.empty(), "scaled_dot_product_attention on ", to_string(device),
                ": cuDNN's fused attention cannot run ", describe(key), ": ", why);
  return key;
}

// Runs `built` with the tensors of `pack` (and the dropout's seed and
// offset), on a workspace from the device's allocator.
void execute(Device device, Attention& attention, const Built& built, const SdpaGraphKey& key,
             std::unordered_map<Attributes::uid_t, void*> pack, const AttentionParams& params) {
  Tensor seed_offset;
  if (params.dropout) {
    const CudnnDropoutSeed s = cudnn_dropout_seed(params.dropout->words);
    seed_offset = Tensor::from_vector(std::vector<int64_t>{s.seed, s.offset}, {2}).to(device);
    pack[kSeed] = seed_offset.data<int64_t>();
    pack[kOffset] = seed_offset.data<int64_t>() + 1;
  }
  const Tensor workspace =
      built.workspace > 0 ? Tensor::empty({built.workspace}, DType::boolean, device) : Tensor();
  const DeviceGuard guard(device);
  check_fe(built.graph->execute(attention.handle(), pack,
                                workspace.defined() ? workspace.raw_data() : nullptr),
           "execute", device, key);
}

}  // namespace

bool built_with_cudnn_attention() { return true; }

Tensors cudnn_sdpa(Device device, const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                   const AttentionParams& params) {
  const Tensor q = head_contiguous(q_in), k = head_contiguous(k_in), v = head_contiguous(v_in);
  const SdpaGraphKey key = checked_key(device, q, k, v, params, false);
  Attention& attention = Attention::of(device);
  const Built& built = attention.graph(key);
  Tensor out = Tensor::empty(o_dims(key), q.dtype(), device);
  Tensor lse = Tensor::empty({key.b, key.hq, key.t}, DType::f32, device);
  execute(device, attention, built, key,
          {{kQ, q.raw_data()},
           {kK, k.raw_data()},
           {kV, v.raw_data()},
           {kO, out.raw_data()},
           {kStats, lse.raw_data()}},
          params);
  return {out, lse};
}

Tensors cudnn_sdpa_backward(Device device, const Tensor& q_in, const Tensor& k_in,
                            const Tensor& v_in, const Tensor& out, const Tensor& lse,
                            const Tensor& dout, const AttentionParams& params, bool need_dq,
                            bool need_dk) {
  const Tensor q = head_contiguous(q_in), k = head_contiguous(k_in), v = head_contiguous(v_in);
  const Tensor o = out.contiguous(), stats = lse.contiguous(), g = dout.contiguous();
  const SdpaGraphKey key = checked_key(device, q, k, v, params, true);
  Attention& attention = Attention::of(device);
  const Built& built = attention.graph(key);
  Tensor dq = Tensor::empty(q_dims(key), q.dtype(), device);
  Tensor dk = Tensor::empty(k_dims(key), q.dtype(), device);
  Tensor dv = Tensor::empty(v_dims(key), q.dtype(), device);
  execute(device, attention, built, key,
          {{kQ, q.raw_data()},
           {kK, k.raw_data()},
           {kV, v.raw_data()},
           {kO, o.raw_data()},
           {kDO, g.raw_data()},
           {kStats, stats.raw_data()},
           {kDQ, dq.raw_data()},
           {kDK, dk.raw_data()},
           {kDV, dv.raw_data()}},
          params);
  return {need_dq ? dq : Tensor(), need_dk ? dk : Tensor(), dv};
}

}  // namespace reprise::cuda
