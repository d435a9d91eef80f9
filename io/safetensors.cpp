#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

#include "base/error.h"
#include "io/json.h"
#include "io/write_file.h"

namespace reprise::io {

// The format stores little-endian bytes; reading and writing them as they
// lie in memory is only right on a little-endian host.
static_assert(std::endian::native == std::endian::little,
              "io/safetensors assumes a little-endian host");

namespace {

// The reference implementation refuses headers over 100 MB; so do we, so a
// corrupted length cannot make us allocate gigabytes for a header.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// reprise's own limits besides kMaxSafetensorsTensors: they bound the work
// and memory spent per entry and per dimension after the header is parsed,
// and the size of error messages that quote a shape.
constexpr size_t kMaxMetadataEntries = size_t(1) << 17;
constexpr size_t kMaxRank = 64;

struct FormatDType {
  const char* name;
  uint32_t bits;               // per element
  std::optional<DType> dtype;  // empty when reprise has no such type
};

// Every dtype the format defines (the Dtype enum of safetensors); those without a
// reprise type can be listed but not loaded.
constexpr FormatDType kFormatDTypes[] = {
    {"F64", 64, DType::f64},
    {"F32", 32, DType::f32},
    {"BF16", 16, DType::bf16},
    {"F16", 16, DType::f16},
    {"I64", 64, DType::i64},
    {"I32", 32, DType::i32},
    {"BOOL", 8, DType::boolean},
    {"U64", 64, {}},
    {"U32", 32, {}},
    {"I16", 16, {}},
    {"U16", 16, {}},
    {"I8", 8, {}},
    {"U8", 8, {}},
    {"F8_E4M3", 8, {}},
    {"F8_E5M2", 8, {}},
    {"F8_E8M0", 8, {}},
    {"F6_E2M3", 6, {}},
    {"F6_E3M2", 6, {}},
    {"F4", 4, {}},
    {"C64", 64, {}},
};

const FormatDType* find_format_dtype(const std::string& name) {
  for (const FormatDType& d : kFormatDTypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

std::string errno_text() { return std::strerror(errno); }

// Reads exactly n bytes at offset; false when the file ends first.
bool pread_all(int fd, void* dst, size_t n, uint64_t offset) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t got = ::pread(fd, p, n, off_t(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= size_t(got);
    offset += uint64_t(got);
  }
  return true;
}

bool write_all(int fd, const void* src, size_t n) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    ssize_t put = ::write(fd, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= size_t(put);
  }
  return true;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// read_into copies this many source bytes at a time, then releases their
// pages: the mapped bytes resident at once stay a few megabytes whatever
// the tensor's size. A multiple of every element size.
constexpr size_t kReadChunkBytes = size_t(4) << 20;

// Drops the pages that hold [p, p + n) from the resident set. They are
// clean pages of a read-only file mapping, so a later read of them (another
// tensor's bytes in a shared page, another thread) faults them back in from
// the file: this only frees memory. A failure only leaves them resident.
void release_pages(const uint8_t* p, size_t n, const uint8_t* map, size_t map_bytes) {
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = std::max(uintptr_t(p) & ~(page - 1), uintptr_t(map));
  const uintptr_t hi =
      std::min((uintptr_t(p) + n + page - 1) & ~(page - 1), uintptr_t(map) + map_bytes);
  if (hi > lo) (void)::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

// n elements of From at `in` (any alignment: a header of any length puts
// the buffer at any offset) converted into `out`.
template <class To, class From>
void convert_elements(To* out, const uint8_t* in, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    From v;
    std::memcpy(&v, in + i * sizeof(From), sizeof(From));
    out[i] = convert<To>(v);
  }
}

// A non-negative integer from the header, or an Error saying what it is.
uint64_t header_uint(const json::Value& v, const std::string& where) {
  REPRISE_CHECK(v.is_int(), where, ": expected a non-negative integer, got ",
                json::kind_name(v.kind()), v.is_number() ? " " + json::dump(v) : "");
  REPRISE_CHECK(v.as_int() >= 0, where, ": expected a non-negative integer, got ", v.as_int());
  return uint64_t(v.as_int());
}

TensorInfo parse_tensor_entry(const std::string& file, const std::string& name,
                              const json::Value& entry) {
  std::string where = "safetensors: " + file + ": tensor " + quoted(name);
  REPRISE_CHECK(entry.is_object(), where,
                ": expected an object with dtype, shape and data_offsets, got ",
                json::kind_name(entry.kind()));
  for (const auto& [key, value] : entry.as_object()) {
    REPRISE_CHECK(key == "dtype" || key == "shape" || key == "data_offsets", where,
                  ": unexpected field \"", key, "\" (expected dtype, shape and data_offsets)");
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    REPRISE_CHECK(entry.find(key) != nullptr, where, ": missing field \"", key, "\"");
  }

  TensorInfo info;
  info.name = name;
  const json::Value& dtype = entry.at("dtype");
  REPRISE_CHECK(dtype.is_string(), where, ": dtype must be a string, got ",
                json::kind_name(dtype.kind()));
  info.dtype_name = dtype.as_string();
  const FormatDType* fd = find_format_dtype(info.dtype_name);
  REPRISE_CHECK(fd != nullptr, where, ": unknown dtype \"", info.dtype_name,
                "\" (expected one of F64, F32, BF16, F16, I64, I32, BOOL, U8, ...)");
  info.dtype = fd->dtype;

  const json::Value& shape = entry.at("shape");
  REPRISE_CHECK(shape.is_array(), where, ": shape must be an array of integers, got ",
                json::kind_name(shape.kind()));
  REPRISE_CHECK(shape.as_array().size() <= kMaxRank, where, ": shape has ", shape.as_array().size(),
                " dimensions; reprise reads at most ", kMaxRank);
  uint64_t numel = 1;
  bool overflow = false;
  for (const json::Value& d : shape.as_array()) {
    uint64_t extent = header_uint(d, where + ": shape " + json::dump(shape));
    info.shape.push_back(int64_t(extent));
    overflow = overflow || __builtin_mul_overflow(numel, extent, &numel);
  }

  const json::Value& offsets = entry.at("data_offsets");
  REPRISE_CHECK(offsets.is_array() && offsets.as_array().size() == 2, where,
                ": data_offsets must be an array [begin, end], got ", json::dump(offsets));
  info.begin = header_uint(offsets.as_array()[0], where + ": data_offsets");
  info.end = header_uint(offsets.as_array()[1], where + ": data_offsets");
  REPRISE_CHECK(info.begin <= info.end, where, ": data_offsets [", info.begin, ", ", info.end,
                "] end before they begin");

  // The element count must fit a Shape's int64 numel, and the bit count 64 bits.
  uint64_t bits = 0;
  overflow = overflow || __builtin_mul_overflow(numel, uint64_t(fd->bits), &bits) ||
             numel > uint64_t(INT64_MAX);
  REPRISE_CHECK(!overflow, where, ": shape ", json::dump(shape), " has too many elements");
  uint64_t bytes = (bits + 7) / 8;
  REPRISE_CHECK(bits % 8 == 0 && bytes == info.end - info.begin, where, ": shape ",
                to_string(info.shape), " of ", info.dtype_name, " needs ",
                bits % 8 == 0 ? std::to_string(bytes) + " bytes" : std::to_string(bits) + " bits",
                " but data_offsets [", info.begin, ", ", info.end, "] hold ",
                info.end - info.begin);
  return info;
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const FormatDType& d : kFormatDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  REPRISE_FAIL("safetensors: no format name for dtype ", dtype_name(dtype));
}

// ---- Reading ----

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    file_size_ = other.file_size_;
    data_start_ = other.data_start_;
    data_bytes_ = other.data_bytes_;
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    data_ = std::exchange(other.data_, nullptr);
    names_ = std::move(other.names_);
    infos_ = std::move(other.infos_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  unmap();
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsFile::unmap() {
  if (map_ != nullptr) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
  map_ = nullptr;
  data_ = nullptr;
  map_bytes_ = 0;
}

std::string describe_tensor_names(const std::vector<std::string>& names) {
  constexpr size_t kShown = 5;
  std::string out = std::to_string(names.size()) + (names.size() == 1 ? " tensor" : " tensors");
  for (size_t i = 0; i < names.size() && i < kShown; ++i) {
    out += (i ? ", " : ": ") + quoted(names[i]);
  }
  if (names.size() > kShown) out += ", ...";
  return out;
}

bool SafetensorsFile::contains(const std::string& name) const { return infos_.count(name) != 0; }

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = infos_.find(name);
  if (it != infos_.end()) return it->second;
  REPRISE_FAIL("safetensors: ", path_, ": no tensor ", quoted(name), "; the file has ",
               describe_tensor_names(names_));
}

void SafetensorsFile::check_unchanged(const std::string& name) const {
  struct stat st;
  REPRISE_CHECK(::fstat(fd_, &st) == 0, "safetensors: ", path_, ": reading tensor ", quoted(name),
                " failed: cannot stat the file: ", errno_text());
  const uint64_t now = uint64_t(st.st_size);
  REPRISE_CHECK(now == file_size_, "safetensors: ", path_, ": reading tensor ", quoted(name),
                " failed: the file is ", now < file_size_ ? "shorter" : "longer",
                " than when it was opened (", file_size_, " bytes then, ", now,
                " now); another process is rewriting it in place");
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const TensorInfo& ti = info(name);
  REPRISE_CHECK(ti.dtype.has_value(), "safetensors: ", path_, ": tensor ", quoted(name),
                " has dtype ", ti.dtype_name,
                ", which reprise cannot load (supported: F64, F32, BF16, F16, I64, I32, BOOL)");
  Tensor t = Tensor::empty(ti.shape, *ti.dtype);
  read_into(name, t);
  return t;
}

void SafetensorsFile::read_into(const std::string& name, Tensor& dst) const {
  const TensorInfo& ti = info(name);
  const std::string where = "safetensors: " + path_ + ": tensor " + quoted(name);
  REPRISE_CHECK(ti.dtype.has_value(), where, " has dtype ", ti.dtype_name,
                ", which reprise cannot load (supported: F64, F32, BF16, F16, I64, I32, BOOL)");
  const DType from = *ti.dtype;
  REPRISE_CHECK(dst.defined(), where, ": read_into: the destination tensor is undefined");
  const std::string stored = ti.dtype_name + to_string(ti.shape);
  REPRISE_CHECK(dst.device().is_cpu() && dst.is_contiguous(), where, " (", stored,
                "): read_into needs a contiguous CPU destination, got ", dst.describe(),
                dst.is_contiguous() ? "" : " with strides " + to_string(dst.strides()));
  REPRISE_CHECK(dst.shape() == ti.shape, where, " is ", stored, " but the destination is ",
                dst.describe(), ": the shapes differ");
  REPRISE_CHECK(from == dst.dtype() || (is_floating(from) && is_floating(dst.dtype())), where,
                " is ", stored, " but the destination is ", dst.describe(),
                ": read_into converts between F32, F64, BF16 and F16 (into f32, f64, bf16 or f16) "
                "and reads I64, I32 and BOOL only into their own dtype");
  check_unchanged(name);

  const size_t n = size_t(ti.end - ti.begin);
  const size_t from_size = dtype_size(from);
  const uint8_t* src = data_ + ti.begin;
  auto* out = static_cast<uint8_t*>(dst.raw_data());
  for (size_t done = 0; done < n; done += kReadChunkBytes) {
    const size_t len = std::min(kReadChunkBytes, n - done);
    const uint8_t* chunk = src + done;
    if (from == DType::boolean) {
      // A bool byte other than 0 or 1 is undefined behaviour once read as bool.
      for (size_t i = 0; i < len; ++i) {
        REPRISE_CHECK(chunk[i] <= 1, "safetensors: ", path_, ": BOOL tensor ", quoted(name),
                      " has byte value ", int(chunk[i]), " at element ", done + i,
                      " (expected 0 or 1)");
      }
    }
    const size_t first = done / from_size;  // the chunk's first element
    if (from == dst.dtype()) {
      std::memcpy(out + done, chunk, len);
    } else {
      dispatch_any_float(dst.dtype(), "safetensors read_into", [&]<class To>() {
        dispatch_any_float(from, "safetensors read_into", [&]<class From>() {
          convert_elements<To, From>(reinterpret_cast<To*>(out) + first, chunk, len / from_size);
        });
      });
    }
    release_pages(chunk, len, map_, map_bytes_);
  }
  dst.storage()->bump_version();
}

std::vector<uint8_t> SafetensorsFile::raw_bytes(const std::string& name) const {
  const TensorInfo& ti = info(name);
  check_unchanged(name);
  return std::vector<uint8_t>(data_ + ti.begin, data_ + ti.end);
}

namespace {

// The header's bytes: an 8-byte little-endian length, then that much JSON,
// within the file and the format's limit.
std::string read_header(int fd, const std::string& path, uint64_t file_size) {
  REPRISE_CHECK(file_size >= 8, "safetensors: ", path, ": truncated file: ", file_size,
                " bytes, fewer than the 8-byte header length");
  uint8_t len_bytes[8];
  REPRISE_CHECK(pread_all(fd, len_bytes, 8, 0), "safetensors: ", path,
                ": reading the header length failed");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  REPRISE_CHECK(header_len <= file_size - 8, "safetensors: ", path, ": header length ", header_len,
                " runs past the end of the file (", file_size, " bytes; truncated file?)");
  REPRISE_CHECK(header_len <= kMaxHeaderBytes, "safetensors: ", path, ": header length ",
                header_len, " exceeds the format's limit of ", kMaxHeaderBytes, " bytes");

  std::string header(size_t(header_len), '\0');
  REPRISE_CHECK(pread_all(fd, header.data(), header.size(), 8), "safetensors: ", path,
                ": reading the header failed");
  return header;
}

// __metadata__: an object of strings.
void read_metadata(const std::string& path, const json::Value& value,
                   std::map<std::string, std::string>& metadata) {
  REPRISE_CHECK(value.is_object(), "safetensors: ", path,
                ": __metadata__ must be an object of strings, got ", json::kind_name(value.kind()));
  REPRISE_CHECK(value.as_object().size() <= kMaxMetadataEntries, "safetensors: ", path,
                ": __metadata__ has ", value.as_object().size(), " entries; reprise reads at most ",
                kMaxMetadataEntries);
  for (const auto& [mk, mv] : value.as_object()) {
    REPRISE_CHECK(mv.is_string(), "safetensors: ", path, ": __metadata__ entry \"", mk,
                  "\" must be a string, got ", json::kind_name(mv.kind()));
    metadata.emplace(mk, mv.as_string());
  }
}

// The tensors must tile the buffer: sorted by offset, each begins where
// the previous one ends, and the last ends at the end of the file.
void check_tiling(const std::string& path, const std::map<std::string, TensorInfo>& infos,
                  uint64_t buffer_size) {
  std::vector<const TensorInfo*> by_offset;
  for (const auto& [name, ti] : infos) by_offset.push_back(&ti);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo* ti : by_offset) {
    // begin < covered needs covered > 0, so there is a previous tensor.
    REPRISE_CHECK(ti->begin >= covered, "safetensors: ", path, ": tensor ", quoted(ti->name), " [",
                  ti->begin, ", ", ti->end, ") overlaps tensor ", quoted(previous->name), " [",
                  previous->begin, ", ", covered, ")");
    REPRISE_CHECK(ti->begin == covered, "safetensors: ", path, ": bytes [", covered, ", ",
                  ti->begin, ") of the data buffer belong to no tensor (a hole before tensor ",
                  quoted(ti->name), ")");
    covered = ti->end;
    previous = ti;
  }
  REPRISE_CHECK(covered == buffer_size, "safetensors: ", path, ": the tensors cover ", covered,
                " bytes but the data buffer has ", buffer_size,
                " (bytes past the last tensor belong to no tensor)");
}

}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  SafetensorsFile file;
  file.path_ = path;
  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REPRISE_CHECK(file.fd_ >= 0, "safetensors: cannot open ", path, ": ", errno_text());
  struct stat st;
  REPRISE_CHECK(::fstat(file.fd_, &st) == 0, "safetensors: cannot stat ", path, ": ", errno_text());
  REPRISE_CHECK(S_ISREG(st.st_mode), "safetensors: ", path, " is not a regular file");
  const uint64_t file_size = uint64_t(st.st_size);

  const std::string header = read_header(file.fd_, path, file_size);
  file.data_start_ = 8 + header.size();
  const uint64_t buffer_size = file_size - file.data_start_;

  json::Value root;
  try {
    root = json::parse(header, {.max_depth = 4});
  } catch (const Error& e) {
    REPRISE_FAIL("safetensors: ", path, ": bad header JSON: ", e.what());
  }
  REPRISE_CHECK(root.is_object(), "safetensors: ", path, ": header must be a JSON object, got ",
                json::kind_name(root.kind()));
  const size_t tensors = root.as_object().size() - (root.find("__metadata__") != nullptr);
  REPRISE_CHECK(tensors <= kMaxSafetensorsTensors, "safetensors: ", path, ": the header lists ",
                tensors, " tensors; reprise reads at most ", kMaxSafetensorsTensors, " per file");

  for (const auto& [key, value] : root.as_object()) {
    if (key == "__metadata__") {
      read_metadata(path, value, file.metadata_);
      continue;
    }
    TensorInfo ti = parse_tensor_entry(path, key, value);
    REPRISE_CHECK(ti.end <= buffer_size, "safetensors: ", path, ": tensor ", quoted(key),
                  " data_offsets [", ti.begin, ", ", ti.end,
                  "] are out of range: the data buffer has ", buffer_size,
                  " bytes (truncated file?)");
    file.names_.push_back(key);
    file.infos_.emplace(key, std::move(ti));
  }

  check_tiling(path, file.infos_, buffer_size);
  file.data_bytes_ = buffer_size;
  file.file_size_ = file_size;

  // Map from the page that holds the buffer's first byte (mmap offsets are
  // page-aligned) to the end of the file. An empty buffer needs no mapping.
  if (buffer_size > 0) {
    const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
    const uint64_t map_start = file.data_start_ & ~(page - 1);
    file.map_bytes_ = size_t(file_size - map_start);
    void* map = ::mmap(nullptr, file.map_bytes_, PROT_READ, MAP_SHARED, file.fd_, off_t(map_start));
    REPRISE_CHECK(map != MAP_FAILED, "safetensors: ", path, ": cannot map its ", buffer_size,
                  "-byte data buffer: ", errno_text());
    file.map_ = static_cast<const uint8_t*>(map);
    file.data_ = file.map_ + (file.data_start_ - map_start);
  }
  return file;
}

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  SafetensorsFile file = read_safetensors(path);
  std::map<std::string, Tensor> out;
  for (const std::string& name : file.names()) out.emplace(name, file.get(name));
  return out;
}

// ---- Writing ----

namespace {

// Removes the temporary file unless the write got as far as the rename.
struct TempFile {
  std::string path;
  int fd = -1;
  bool renamed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!renamed && !path.empty()) ::unlink(path.c_str());
  }
};

}  // namespace

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_safetensors(path, tensors, {}, metadata);
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::vector<std::pair<std::string, RawTensor>>& raw,
                       const std::map<std::string, std::string>& metadata) {
  const std::string where = "safetensors: writing " + path;

  // Contiguous CPU copies (no copy when already so), and the header.
  std::vector<Tensor> data;
  json::Value header{json::Object{}};
  if (!metadata.empty()) {
    json::Object meta;
    for (const auto& [k, v] : metadata) meta.emplace_back(k, json::Value(v));
    header.as_object().emplace_back("__metadata__", json::Value(std::move(meta)));
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  // The header entry of the next tensor, after the ones before it.
  auto add_entry = [&](const std::string& name, const std::string& dtype, const Shape& shape,
                       uint64_t bytes) {
    REPRISE_CHECK(name != "__metadata__", where, ": a tensor cannot be named __metadata__");
    REPRISE_CHECK(seen.insert(name).second, where, ": duplicate tensor name ", quoted(name));
    json::Array dims;
    for (int64_t d : shape) dims.emplace_back(d);
    const uint64_t end = offset + bytes;
    json::Object entry{{"dtype", json::Value(dtype)},
                       {"shape", json::Value(std::move(dims))},
                       {"data_offsets", json::Value(json::Array{int64_t(offset), int64_t(end)})}};
    header.as_object().emplace_back(name, json::Value(std::move(entry)));
    offset = end;
  };
  for (const auto& [name, tensor] : tensors) {
    REPRISE_CHECK(tensor.defined(), where, ": tensor ", quoted(name), " is undefined");
    Tensor t = tensor.device().is_cpu() ? tensor : tensor.to(Device::cpu());
    t = t.contiguous();
    add_entry(name, safetensors_dtype_name(t.dtype()), t.shape(), t.nbytes());
    data.push_back(std::move(t));
  }
  for (const auto& [name, r] : raw) {
    const FormatDType* fd = find_format_dtype(r.dtype_name);
    REPRISE_CHECK(fd != nullptr, where, ": tensor ", quoted(name), " has dtype ", r.dtype_name,
                  ", which is not one of the format's");
    REPRISE_CHECK(uint64_t(numel(r.shape)) * fd->bits == uint64_t(r.bytes.size()) * 8, where,
                  ": tensor ", quoted(name), " is ", r.dtype_name, to_string(r.shape), " but has ",
                  r.bytes.size(), " bytes");
    add_entry(name, r.dtype_name, r.shape, r.bytes.size());
  }
  std::string header_text = json::dump(header);
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  uint8_t len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = uint8_t(uint64_t(header_text.size()) >> (8 * i));

  // A unique name beside the target, so the rename stays in one filesystem.
  static std::atomic<uint64_t> counter{0};
  TempFile tmp;
  for (int attempt = 0; tmp.fd < 0; ++attempt) {
    tmp.path = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (tmp.fd < 0) {
      int err = errno;
      tmp.path.clear();  // not ours: never unlink it
      REPRISE_CHECK(err == EEXIST && attempt < 100, where, ": cannot create a temporary file in ",
                    parent_dir(path), ": ", std::strerror(err));
    }
  }

  bool ok =
      write_all(tmp.fd, len_bytes, 8) && write_all(tmp.fd, header_text.data(), header_text.size());
  for (size_t i = 0; ok && i < data.size(); ++i) {
    ok = write_all(tmp.fd, data[i].raw_data(), data[i].nbytes());
  }
  for (size_t i = 0; ok && i < raw.size(); ++i) {
    ok = write_all(tmp.fd, raw[i].second.bytes.data(), raw[i].second.bytes.size());
  }
  REPRISE_CHECK(ok, where, ": write to ", tmp.path, " failed: ", errno_text());
  REPRISE_CHECK(::fsync(tmp.fd) == 0, where, ": fsync of ", tmp.path, " failed: ", errno_text());
  int fd = std::exchange(tmp.fd, -1);
  REPRISE_CHECK(::close(fd) == 0, where, ": close of ", tmp.path, " failed: ", errno_text());
  REPRISE_CHECK(::rename(tmp.path.c_str(), path.c_str()) == 0, where, ": rename from ", tmp.path,
                " failed: ", errno_text());
  tmp.renamed = true;

  // Make the rename itself durable.
  sync_parent_dir(path, where + ": the file is written, but");
}

}  // namespace reprise::io
