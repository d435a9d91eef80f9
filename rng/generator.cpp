#include "rng/generator.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace reprise::rng {
namespace {

constexpr uint8_t kMagic[4] = {'R', 'P', 'R', 'G'};
constexpr uint32_t kVersion = 1;

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

// Reads little-endian fields from a byte range, failing loudly at its end.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* take(size_t n) {
    REPRISE_CHECK(n <= size_ - pos_, "GeneratorState::from_bytes: truncated at byte ", pos_, " of ",
                  size_);
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  uint32_t u32() {
    const uint8_t* p = take(4);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
    return v;
  }
  uint64_t u64() {
    const uint8_t* p = take(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
    return v;
  }
  bool done() const { return pos_ == size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Index of `name` in `state`, or -1.
int64_t find_stream(const GeneratorState& state, std::string_view name) {
  for (size_t i = 0; i < state.streams.size(); ++i) {
    if (state.streams[i].name == name) return int64_t(i);
  }
  return -1;
}

// Throws unless `name` is usable next to the first `count` streams of `state`.
void check_new_stream(const GeneratorState& state, size_t count, std::string_view name) {
  REPRISE_CHECK(!name.empty(), "rng::Generator: a stream name must not be empty");
  const uint64_t sub = Generator::subsequence_of(name);
  for (size_t i = 0; i < count; ++i) {
    const std::string& other = state.streams[i].name;
    REPRISE_CHECK(other != name, "rng::Generator: stream '", name, "' appears twice");
    REPRISE_CHECK(Generator::subsequence_of(other) != sub, "rng::Generator: streams '", name,
                  "' and '", other, "' hash to the same subsequence ", sub, "; rename one");
  }
}

}  // namespace

std::vector<uint8_t> GeneratorState::to_bytes() const {
  std::vector<uint8_t> out(kMagic, kMagic + 4);
  put_u32(out, kVersion);
  put_u64(out, seed);
  put_u32(out, uint32_t(streams.size()));
  for (const Stream& s : streams) {
    put_u32(out, uint32_t(s.name.size()));
    out.insert(out.end(), s.name.begin(), s.name.end());
    put_u64(out, s.offset);
  }
  return out;
}

GeneratorState GeneratorState::from_bytes(const uint8_t* data, size_t size) {
  Reader in(data, size);
  const uint8_t* magic = in.take(4);
  REPRISE_CHECK(std::equal(magic, magic + 4, kMagic),
                "GeneratorState::from_bytes: not a generator state");
  const uint32_t version = in.u32();
  REPRISE_CHECK(version == kVersion, "GeneratorState::from_bytes: version ", version, ", expected ",
                kVersion);
  GeneratorState state;
  state.seed = in.u64();
  const uint32_t count = in.u32();
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t len = in.u32();
    const uint8_t* name = in.take(len);
    Stream s;
    s.name.assign(reinterpret_cast<const char*>(name), len);
    s.offset = in.u64();
    state.streams.push_back(std::move(s));
  }
  REPRISE_CHECK(in.done(), "GeneratorState::from_bytes: ", size,
                " bytes, trailing data after the state");
  return state;
}

Generator::Generator(uint64_t seed) { state_.seed = seed; }

uint64_t Generator::seed() const {
  std::lock_guard lock(mutex_);
  return state_.seed;
}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard lock(mutex_);
  state_ = GeneratorState{seed, {}};
}

Reservation Generator::reserve(std::string_view stream, uint64_t words) {
  std::lock_guard lock(mutex_);
  int64_t index = find_stream(state_, stream);
  if (index < 0) {
    check_new_stream(state_, state_.streams.size(), stream);
    REPRISE_CHECK(state_.streams.size() < std::numeric_limits<uint32_t>::max(),
                  "rng::Generator: too many streams");
    state_.streams.push_back({std::string(stream), 0});
    index = int64_t(state_.streams.size()) - 1;
  }
  GeneratorState::Stream& s = state_.streams[size_t(index)];
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  // With a slice: the words of the whole batch (per sample x total).
  const bool sliced = slice_ && slice_->count != slice_->total;
  uint64_t per_sample = 0, global = words;
  if (sliced) {
    REPRISE_CHECK(words % slice_->count == 0, "rng::Generator::reserve: stream '", stream,
                  "': ", words, " words are not ", slice_->count,
                  " equal per-sample parts (the sample slice needs the batch outermost)");
    per_sample = words / slice_->count;
    REPRISE_CHECK(per_sample == 0 || slice_->total <= max / per_sample,
                  "rng::Generator::reserve: stream '", stream, "': ", per_sample, " words x ",
                  slice_->total, " samples overflow");
    global = per_sample * slice_->total;
  }
  REPRISE_CHECK(global <= max - 3 && (global + 3) / 4 * 4 <= max - s.offset,
                "rng::Generator::reserve: stream '", stream, "' at offset ", s.offset,
                " cannot hold ", global, " more words");
  const uint64_t count = (global + 3) / 4 * 4;
  Reservation r;
  r.seed = state_.seed;
  r.subsequence = subsequence_of(stream);
  r.offset = sliced ? s.offset + slice_->first * per_sample : s.offset;
  r.count = sliced ? words : count;
  r.stream = uint32_t(index);
  s.offset += count;
  return r;
}

void Generator::set_sample_slice(std::optional<SampleSlice> slice) {
  REPRISE_CHECK(!slice || (slice->count >= 1 && slice->first <= slice->total &&
                           slice->count <= slice->total - slice->first),
                "rng::Generator::set_sample_slice: samples [", slice ? slice->first : 0, ", ",
                slice ? slice->first + slice->count : 0, ") do not lie in a batch of ",
                slice ? slice->total : 0);
  std::lock_guard lock(mutex_);
  slice_ = slice;
}

std::optional<SampleSlice> Generator::sample_slice() const {
  std::lock_guard lock(mutex_);
  return slice_;
}

SampleSliceGuard::SampleSliceGuard(Generator& gen, SampleSlice slice)
    : gen_(gen), previous_(gen.sample_slice()) {
  gen_.set_sample_slice(slice);
}

SampleSliceGuard::~SampleSliceGuard() { gen_.set_sample_slice(previous_); }

uint64_t Generator::offset(std::string_view stream) const {
  std::lock_guard lock(mutex_);
  const int64_t index = find_stream(state_, stream);
  return index < 0 ? 0 : state_.streams[size_t(index)].offset;
}

GeneratorState Generator::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

void Generator::set_state(const GeneratorState& state) {
  for (size_t i = 0; i < state.streams.size(); ++i) {
    check_new_stream(state, i, state.streams[i].name);
    REPRISE_CHECK(state.streams[i].offset % 4 == 0, "rng::Generator::set_state: stream '",
                  state.streams[i].name, "' has offset ", state.streams[i].offset,
                  ", not a multiple of 4");
  }
  std::lock_guard lock(mutex_);
  state_ = state;
}

uint64_t Generator::subsequence_of(std::string_view name) {
  if (name == "default") return 0;
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64-bit offset basis and prime
  for (const char c : name) {
    h ^= uint8_t(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::shared_ptr<Generator> default_generator_handle() {
  static const std::shared_ptr<Generator> gen = std::make_shared<Generator>();
  return gen;
}

Generator& default_generator() {
  static Generator& gen = *default_generator_handle();
  return gen;
}

}  // namespace reprise::rng
