#include "nn/routing.h"

#include <algorithm>
#include <mutex>
#include <thread>
#include <utility>

#include "base/error.h"
#include "io/safetensors.h"

namespace reprise::nn {
namespace {

// The open guards of one kind (RoutingCapture, RoutingReplay), each with
// the thread that opened it; a thread's innermost is its last. A guard
// removes itself wherever it stands, from whichever thread it is destroyed
// on, so one closed out of order (a Python object collected late, or on
// another thread) never leaves a dangling pointer behind.
template <class Guard>
class OpenGuards {
 public:
  void open(Guard* g) {
    std::lock_guard lock(mutex_);
    open_.emplace_back(std::this_thread::get_id(), g);
  }
  void close(Guard* g) {
    std::lock_guard lock(mutex_);
    std::erase_if(open_, [g](const auto& entry) { return entry.second == g; });
  }
  Guard* innermost() const {
    const std::thread::id self = std::this_thread::get_id();
    std::lock_guard lock(mutex_);
    for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
      if (it->first == self) return it->second;
    }
    return nullptr;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<std::thread::id, Guard*>> open_;
};

OpenGuards<RoutingCapture>& open_captures() {
  static OpenGuards<RoutingCapture> guards;
  return guards;
}
OpenGuards<RoutingReplay>& open_replays() {
  static OpenGuards<RoutingReplay> guards;
  return guards;
}

}  // namespace

RoutingRecord RoutingRecord::first_positions(int64_t count) const {
  REPRISE_CHECK(count >= 0 && count <= positions, "RoutingRecord: ", count,
                " positions asked of a record of ", positions);
  const int64_t L = int64_t(layers.size());
  RoutingRecord r = *this;
  r.positions = count;
  r.experts.resize(size_t(count * L * k));
  r.margin.resize(size_t(count * L));
  return r;
}

void RoutingRecord::append(const RoutingRecord& more) {
  if (positions == 0 && layers.empty()) {
    *this = more;
    return;
  }
  RoutingRecord shape = more;
  shape.positions = positions;
  check_matches(shape, "RoutingRecord::append");
  experts.insert(experts.end(), more.experts.begin(), more.experts.end());
  margin.insert(margin.end(), more.margin.begin(), more.margin.end());
  positions += more.positions;
}

void RoutingRecord::check_matches(const RoutingRecord& o, const std::string& what) const {
  REPRISE_CHECK(
      layers == o.layers && num_experts == o.num_experts && k == o.k && positions == o.positions,
      what, ": a routing record of ", o.layers.size(), " MoE layers, E = ", o.num_experts,
      ", k = ", o.k, " and ", o.positions, " positions does not fit ", layers.size(),
      " layers, E = ", num_experts, ", k = ", k, " and ", positions, " positions",
      layers == o.layers || layers.empty() || o.layers.empty()
          ? std::string()
          : " (layer " + o.layers[0] + " against " + layers[0] + ")");
}

void RoutingRecord::validate(const std::string& what) const {
  const int64_t L = int64_t(layers.size());
  REPRISE_CHECK(
      positions >= 0 && k >= 0 && (L == 0 || (k >= 1 && k <= num_experts)) && num_experts <= 65536,
      what, ": a routing record of ", positions, " positions, ", L, " layers, k = ", k,
      " of E = ", num_experts, " experts (expected 1 <= k <= E <= 65536)");
  REPRISE_CHECK(
      int64_t(experts.size()) == positions * L * k && int64_t(margin.size()) == positions * L, what,
      ": a routing record of ", positions, " positions, ", L, " layers and k = ", k, " needs ",
      positions * L * k, " experts and ", positions * L, " margins, got ", experts.size(), " and ",
      margin.size());
  for (int64_t t = 0; t < positions; ++t) {
    for (int64_t l = 0; l < L; ++l) {
      const auto row = experts.begin() + (t * L + l) * k;
      for (int64_t j = 0; j < k; ++j) {
        REPRISE_CHECK(row[j] < num_experts, what, ": position ", t, " of layer '",
                      layers[size_t(l)], "' chose expert ", row[j], ", but there are ",
                      num_experts);
        REPRISE_CHECK(std::find(row, row + j, row[j]) == row + j, what, ": position ", t,
                      " of layer '", layers[size_t(l)], "' chose expert ", row[j], " twice");
      }
    }
  }
}

RoutingRecord routing_record(std::vector<std::string> layers, int64_t num_experts,
                             const Tensor& experts, const Tensor& margin) {
  const int64_t L = int64_t(layers.size());
  REPRISE_CHECK(experts.defined() && experts.dim() == 3 && experts.size(1) == L &&
                    !is_floating(experts.dtype()) && experts.dtype() != DType::boolean,
                "routing_record: expected experts (P, L = ", L, ", k) of an integer dtype, got ",
                experts.defined() ? experts.describe() : std::string("undefined"));
  const int64_t P = experts.size(0);
  REPRISE_CHECK(
      !margin.defined() || (margin.dtype() == DType::i64 && (margin.shape() == Shape{P, L})),
      "routing_record: expected margin (P, L) = (", P, ", ", L, ") i64, got ",
      margin.defined() ? margin.describe() : std::string());
  RoutingRecord r;
  r.layers = std::move(layers);
  r.num_experts = num_experts;
  r.k = experts.size(2);
  r.positions = P;
  for (int64_t e : experts.to_vector<int64_t>()) {
    REPRISE_CHECK(e >= 0 && e < num_experts && e < 65536, "routing_record: expert id ", e,
                  " outside [0, ", num_experts, ")");
    r.experts.push_back(uint16_t(e));
  }
  r.margin = margin.defined() ? margin.to_vector<int64_t>() : std::vector<int64_t>(size_t(P * L));
  r.validate("routing_record");
  return r;
}

namespace {

constexpr const char* kRecordsFormat = "reprise.routing_records";

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (!text.empty() && start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A metadata entry as a non-negative integer; an Error naming the file.
int64_t count_of(const std::map<std::string, std::string>& meta, const std::string& key,
                 const std::string& path) {
  const auto it = meta.find(key);
  REPRISE_CHECK(it != meta.end(), "load_routing_records: ", path, ": no '", key,
                "' in the metadata");
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(it->second, &used);
  } catch (const std::exception&) {
  }
  REPRISE_CHECK(v >= 0 && used == it->second.size() && !it->second.empty(),
                "load_routing_records: ", path, ": '", key, "' is '", it->second, "', not a count");
  return v;
}

}  // namespace

void save_routing_records(const std::string& path, const std::vector<RoutingRecord>& records) {
  REPRISE_CHECK(!records.empty(), "save_routing_records: ", path, ": no records");
  std::vector<std::pair<std::string, Tensor>> margins;
  std::vector<std::pair<std::string, io::RawTensor>> experts;
  const RoutingRecord& first = records[0];
  const int64_t L = int64_t(first.layers.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const RoutingRecord& r = records[i];
    const std::string what = "save_routing_records: " + path + ": record " + std::to_string(i);
    r.validate(what);
    RoutingRecord shape = r;
    shape.positions = first.positions;
    first.check_matches(shape, what);
    io::RawTensor e{"U16", {r.positions, L, r.k}, {}};
    for (uint16_t id : r.experts) {
      e.bytes.push_back(uint8_t(id & 0xff));
      e.bytes.push_back(uint8_t(id >> 8));
    }
    experts.emplace_back(std::to_string(i) + ".experts", std::move(e));
    margins.emplace_back(std::to_string(i) + ".margin",
                         Tensor::from_vector(r.margin, {r.positions, L}));
  }
  io::write_safetensors(path, margins, experts,
                        {{"format", kRecordsFormat},
                         {"version", "1"},
                         {"sequences", std::to_string(records.size())},
                         {"layers", joined(first.layers)},
                         {"num_experts", std::to_string(first.num_experts)},
                         {"k", std::to_string(first.k)}});
}

std::vector<RoutingRecord> load_routing_records(const std::string& path) {
  const io::SafetensorsFile file = io::read_safetensors(path);
  const auto& meta = file.metadata();
  const auto format = meta.find("format");
  REPRISE_CHECK(format != meta.end() && format->second == kRecordsFormat,
                "load_routing_records: ", path, " is not a routing records file (its metadata has ",
                format == meta.end() ? "no format" : "format '" + format->second + "'", ", not '",
                kRecordsFormat, "')");
  REPRISE_CHECK(count_of(meta, "version", path) == 1, "load_routing_records: ", path, ": version ",
                meta.at("version"), " is not 1, the one this build reads");
  const int64_t n = count_of(meta, "sequences", path);
  const auto layers = meta.find("layers");
  REPRISE_CHECK(layers != meta.end(), "load_routing_records: ", path,
                ": no 'layers' in the metadata");
  // What every record shares, from the metadata.
  RoutingRecord shared;
  shared.layers = split_names(layers->second);
  shared.num_experts = count_of(meta, "num_experts", path);
  shared.k = count_of(meta, "k", path);
  const int64_t L = int64_t(shared.layers.size());
  std::vector<RoutingRecord> out;
  for (int64_t i = 0; i < n; ++i) {
    const std::string what = "load_routing_records: " + path + ": record " + std::to_string(i);
    RoutingRecord r = shared;
    const io::TensorInfo& e = file.info(std::to_string(i) + ".experts");
    REPRISE_CHECK(
        e.dtype_name == "U16" && e.shape.size() == 3 && e.shape[1] == L && e.shape[2] == r.k, what,
        ": experts are ", e.dtype_name, to_string(e.shape), ", expected U16[P, ", L, ", ", r.k,
        "]");
    r.positions = e.shape[0];
    const std::vector<uint8_t> bytes = file.raw_bytes(e.name);
    for (size_t b = 0; b + 1 < bytes.size(); b += 2)
      r.experts.push_back(uint16_t(bytes[b] | (uint16_t(bytes[b + 1]) << 8)));
    const Tensor margin = file.get(std::to_string(i) + ".margin");
    REPRISE_CHECK(margin.dtype() == DType::i64 && (margin.shape() == Shape{r.positions, L}), what,
                  ": margin is ", margin.describe(), ", expected i64[", r.positions, ", ", L, "]");
    r.margin = margin.to_vector<int64_t>();
    r.validate(what);
    out.push_back(std::move(r));
  }
  return out;
}

int64_t routing_flips(const RoutingRecord& a, const RoutingRecord& b) {
  a.check_matches(b, "routing_flips");
  int64_t flips = 0;
  std::vector<uint16_t> x(size_t(a.k)), y(size_t(a.k));
  for (size_t i = 0; i < a.experts.size(); i += size_t(a.k)) {
    std::copy_n(a.experts.begin() + int64_t(i), a.k, x.begin());
    std::copy_n(b.experts.begin() + int64_t(i), a.k, y.begin());
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    flips += x != y;
  }
  return flips;
}

RoutingCapture::RoutingCapture() { open_captures().open(this); }
RoutingCapture::~RoutingCapture() { close(); }

void RoutingCapture::close() {
  if (!open_) return;
  open_captures().close(this);
  open_ = false;
}

RoutingCapture* current_routing_capture() { return open_captures().innermost(); }

void RoutingCapture::routed(const std::string& layer, const Tensor& indices, const Tensor& margin,
                            int64_t num_experts) {
  REPRISE_CHECK(num_experts >= 1 && num_experts <= 65536, "RoutingCapture: layer '", layer,
                "' has ", num_experts, " experts; a record holds at most 65536");
  layers_.push_back({.name = layer,
                     .num_experts = num_experts,
                     .indices = indices.to_vector<int64_t>(),
                     .margin = margin.to_vector<int64_t>(),
                     .k = indices.size(1)});
}

std::vector<RoutingRecord> RoutingCapture::records(int64_t batch, int64_t positions) const {
  std::vector<RoutingRecord> out(static_cast<size_t>(batch));
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    REPRISE_CHECK(int64_t(layer.margin.size()) == batch * positions, "RoutingCapture: layer '",
                  layer.name, "' routed ", layer.margin.size(), " tokens, not ", batch, " x ",
                  positions);
    for (size_t m = 0; m < l; ++m) {
      REPRISE_CHECK(layers_[m].name != layer.name, "RoutingCapture: layer '", layer.name,
                    "' routed twice in one forward");
    }
    REPRISE_CHECK(layer.num_experts == layers_[0].num_experts && layer.k == layers_[0].k,
                  "RoutingCapture: layer '", layer.name, "' routes to ", layer.k, " of ",
                  layer.num_experts, " experts, layer '", layers_[0].name, "' to ", layers_[0].k,
                  " of ", layers_[0].num_experts);
  }
  const int64_t L = int64_t(layers_.size());
  for (int64_t b = 0; b < batch; ++b) {
    RoutingRecord& r = out[size_t(b)];
    r.positions = positions;
    for (const Layer& layer : layers_) r.layers.push_back(layer.name);
    if (L == 0) continue;
    r.num_experts = layers_[0].num_experts;
    r.k = layers_[0].k;
    r.experts.resize(size_t(positions * L * r.k));
    r.margin.resize(size_t(positions * L));
    for (int64_t t = 0; t < positions; ++t) {
      const int64_t n = b * positions + t;  // the token in the forward
      for (int64_t l = 0; l < L; ++l) {
        const Layer& layer = layers_[size_t(l)];
        for (int64_t j = 0; j < r.k; ++j)
          r.experts[size_t((t * L + l) * r.k + j)] = uint16_t(layer.indices[size_t(n * r.k + j)]);
        r.margin[size_t(t * L + l)] = layer.margin[size_t(n)];
      }
    }
  }
  return out;
}

RoutingReplay::RoutingReplay(std::vector<RoutingRecord> records, int64_t positions)
    : records_(std::move(records)), positions_(positions) {
  REPRISE_CHECK(!records_.empty(), "RoutingReplay: no records");
  for (size_t b = 0; b < records_.size(); ++b) {
    const RoutingRecord& r = records_[b];
    REPRISE_CHECK(r.positions <= positions, "RoutingReplay: record ", b, " has ", r.positions,
                  " positions, more than the forward's ", positions);
    RoutingRecord shape = r;
    shape.positions = records_[0].positions;
    records_[0].check_matches(shape, "RoutingReplay: record " + std::to_string(b));
  }
  open_replays().open(this);
}

RoutingReplay::~RoutingReplay() { open_replays().close(this); }

RoutingReplay* current_routing_replay() { return open_replays().innermost(); }

std::vector<int64_t> RoutingReplay::experts(const std::string& layer, int64_t tokens,
                                            int64_t num_experts, int64_t k) const {
  const RoutingRecord& first = records_[0];
  const int64_t B = int64_t(records_.size());
  REPRISE_CHECK(tokens == B * positions_, "RoutingReplay: MoE layer '", layer, "' routes ", tokens,
                " tokens, but the records are for a forward of ", B, " x ", positions_);
  const auto it = std::find(first.layers.begin(), first.layers.end(), layer);
  REPRISE_CHECK(it != first.layers.end(), "RoutingReplay: the records have no MoE layer '", layer,
                "' (they have ", first.layers.size(), " layers",
                first.layers.empty() ? std::string() : ", the first '" + first.layers[0] + "'",
                ")");
  REPRISE_CHECK(first.num_experts == num_experts && first.k == k, "RoutingReplay: MoE layer '",
                layer, "' routes to ", k, " of ", num_experts, " experts, the records to ", first.k,
                " of ", first.num_experts);
  const int64_t l = it - first.layers.begin(), L = int64_t(first.layers.size());
  std::vector<int64_t> out(size_t(tokens * k), -1);
  for (int64_t b = 0; b < B; ++b) {
    const RoutingRecord& r = records_[size_t(b)];
    for (int64_t t = 0; t < r.positions; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = r.experts[size_t((t * L + l) * k + j)];
        REPRISE_CHECK(e < num_experts, "RoutingReplay: record ", b, " gives position ", t,
                      " of layer '", layer, "' expert ", e, ", but the layer has ", num_experts);
        const auto row = out.begin() + ((b * positions_) + t) * k;
        REPRISE_CHECK(std::find(row, row + j, e) == row + j, "RoutingReplay: record ", b,
                      " gives position ", t, " of layer '", layer, "' expert ", e, " twice");
        row[j] = e;
      }
    }
  }
  return out;
}

}  // namespace reprise::nn
