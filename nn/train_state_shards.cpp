#include "nn/train_state_shards.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <set>
#include <utility>

#include "base/error.h"
#include "nn/signed_metadata.h"
#include "nn/train_config.h"

namespace reprise::nn {

namespace {

using train_json::field, train_json::int_field;

constexpr SignedFormat kShardFormat{"reprise.optimizer_shard", "reprise.optimizer_shard", 1,
                                    "optimizer shard"};
constexpr const char* kMoments[] = {".exp_avg", ".exp_avg_sq"};

// The three integers of a piece's [begin, end, numel] entry.
std::array<int64_t, 3> piece_bounds(const json::Value& v, const std::string& where) {
  REPRISE_CHECK(v.is_array() && v.as_array().size() == 3, where, " must be [begin, end, numel]");
  std::array<int64_t, 3> out{};
  for (size_t i = 0; i < 3; ++i) {
    REPRISE_CHECK(v.as_array()[i].is_int(), where, " must hold integers");
    out[i] = v.as_array()[i].as_int();
  }
  REPRISE_CHECK(0 <= out[0] && out[0] < out[1] && out[1] <= out[2], where, ": [", out[0], ", ",
                out[1], ") is not a non-empty range of ", out[2], " elements");
  return out;
}

}  // namespace

std::string moment_shard_name(int64_t rank, int64_t ranks, uint64_t hash) {
  return "train_state.rank" + std::to_string(rank) + "-of-" + std::to_string(ranks) + "." +
         hex64(hash) + ".safetensors";
}

uint64_t write_moment_shard(const std::string& dir, int rank, int ranks, int64_t step,
                            const std::vector<AdamW::MomentSlice>& slices) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  json::Value pieces = json::Object{};
  for (const AdamW::MomentSlice& s : slices) {
    pieces.set(s.param, json::Array{s.begin, s.end, s.numel});
    for (const auto& [suffix, value] :
         {std::pair{kMoments[0], s.exp_avg}, {kMoments[1], s.exp_avg_sq}})
      tensors.emplace_back(s.param + suffix,
                           value.device() == Device::cpu() ? value : value.to(Device::cpu()));
  }
  json::Value state = json::Object{};
  state.set("format", kShardFormat.format);
  state.set("version", kShardFormat.version);
  state.set("rank", int64_t(rank));
  state.set("ranks", int64_t(ranks));
  state.set("step", step);
  state.set("pieces", std::move(pieces));
  state.set("checksums", tensor_checksums(tensors));
  const std::string text = json::dump(state, 1);
  const uint64_t hash = fnv1a64(text);
  io::write_safetensors(
      (std::filesystem::path(dir) / moment_shard_name(rank, ranks, hash)).string(), tensors,
      signed_metadata(kShardFormat.key, text));
  return hash;
}

MomentShards::MomentShards(const std::string& dir, const std::vector<uint64_t>& hashes,
                           int64_t step) {
  const int64_t ranks = int64_t(hashes.size());
  std::map<std::string, std::string> numel_file;  // the file that first gave a parameter's size
  for (int64_t r = 0; r < ranks; ++r) {
    const std::string path =
        (std::filesystem::path(dir) / moment_shard_name(r, ranks, hashes[size_t(r)])).string();
    REPRISE_CHECK(std::filesystem::is_regular_file(path), "no optimizer shard at '", path,
                  "': the checkpoint lists the moments of rank ", r, " of ", ranks,
                  " there (each process of the run that saved it wrote one)");
    io::SafetensorsFile file = io::read_safetensors(path);
    const SignedJson meta = read_signed_metadata(file, kShardFormat);
    REPRISE_CHECK(meta.hash == hashes[size_t(r)], path,
                  ": its JSON does not have the hash the checkpoint lists for it");
    const json::Value& v = meta.value;
    REPRISE_CHECK(int_field(v, "rank", path) == r && int_field(v, "ranks", path) == ranks &&
                      int_field(v, "step", path) == step,
                  path, ": holds rank ", int_field(v, "rank", path), " of ",
                  int_field(v, "ranks", path), " at step ", int_field(v, "step", path),
                  ", the checkpoint lists it as rank ", r, " of ", ranks, " at step ", step);
    const json::Value& pieces = field(v, "pieces", path);
    const json::Value& checksums = field(v, "checksums", path);
    REPRISE_CHECK(pieces.is_object() && checksums.is_object() &&
                      checksums.as_object().size() == file.names().size() &&
                      file.names().size() == 2 * pieces.as_object().size(),
                  path, ": its pieces, checksums and tensors do not match (",
                  pieces.is_object() ? pieces.as_object().size() : 0, " pieces, ",
                  checksums.is_object() ? checksums.as_object().size() : 0, " checksums, ",
                  file.names().size(), " tensors)");
    for (const auto& [param, bounds] : pieces.as_object()) {
      const auto [begin, end, numel] =
          piece_bounds(bounds, path + ": the piece of '" + param + "'");
      for (const char* suffix : kMoments) {
        const std::string name = param + suffix;
        const io::TensorInfo& info = file.info(name);
        REPRISE_CHECK(info.dtype == DType::f32 && info.shape == Shape{end - begin}, path,
                      ": tensor '", name, "' is ", info.dtype_name, " ", to_string(info.shape),
                      ", expected F32 [", end - begin, "]");
        REPRISE_CHECK(checksums.find(name) != nullptr, path, ": no checksum for '", name, "'");
      }
      const auto [known, fresh] = numels_.emplace(param, numel);
      if (fresh) numel_file.emplace(param, path);
      REPRISE_CHECK(known->second == numel, path, ": '", param, "' has ", numel, " elements, and ",
                    known->second, " in ", numel_file.at(param));
      pieces_[param].push_back({size_t(r), begin, end});
    }
    files_.push_back(std::move(file));
    checksums_.push_back(checksums);
  }
  // Each parameter covered exactly once.
  for (auto& [param, list] : pieces_) {
    std::sort(list.begin(), list.end(),
              [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
    int64_t at = 0;
    for (const Piece& p : list) {
      REPRISE_CHECK(p.begin <= at, "the optimizer shards in '", dir, "' hold no moments for ",
                    "elements [", at, ", ", p.begin, ") of '", param, "'");
      REPRISE_CHECK(p.begin == at, files_[p.file].path(), ": elements [", p.begin, ", ",
                    std::min(at, p.end), ") of '", param, "' are in another rank's file too");
      at = p.end;
    }
    REPRISE_CHECK(at == numels_.at(param), "the optimizer shards in '", dir,
                  "' hold no moments for elements [", at, ", ", numels_.at(param), ") of '", param,
                  "'");
  }
}

Tensor MomentShards::read(const std::string& key, int64_t begin, int64_t end) const {
  std::string param;
  for (const std::string suffix : kMoments) {
    if (key.ends_with(suffix)) param = key.substr(0, key.size() - suffix.size());
  }
  const auto it = pieces_.find(param);
  REPRISE_CHECK(it != pieces_.end(), "the optimizer shards hold no moment '", key, "'");
  const int64_t numel = numels_.at(param);
  REPRISE_CHECK(0 <= begin && begin <= end && end <= numel, "elements [", begin, ", ", end,
                ") of '", key, "', which has ", numel);
  Tensor out;
  for (const Piece& p : it->second) {
    if (p.end <= begin || p.begin >= end) continue;
    const io::SafetensorsFile& file = files_[p.file];
    const Tensor stored = file.get(key);
    check_tensor_hash(file.path(), key, *checksums_[p.file].find(key), stored);
    if (p.begin == begin && p.end == end) return stored;
    if (!out.defined()) out = Tensor::empty({end - begin}, DType::f32, Device::cpu());
    const int64_t from = std::max(begin, p.begin), to = std::min(end, p.end);
    out.slice(0, from - begin, to - begin).copy_(stored.slice(0, from - p.begin, to - p.begin));
  }
  return out.defined() ? out : Tensor::empty({0}, DType::f32, Device::cpu());
}

void remove_train_state_temporaries(const std::string& dir) {
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("train_state.") && name.find(".safetensors.tmp.") != std::string::npos)
      std::filesystem::remove(e.path());
  }
}

void remove_unlisted_moment_shards(const std::string& dir, int64_t ranks,
                                   const std::vector<uint64_t>& hashes) {
  std::set<std::string> keep;
  for (size_t r = 0; r < hashes.size(); ++r)
    keep.insert(moment_shard_name(int64_t(r), ranks, hashes[r]));
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool shard = name.starts_with("train_state.rank") && name.ends_with(".safetensors");
    if (shard && keep.count(name) == 0) std::filesystem::remove(e.path());
  }
}

}  // namespace reprise::nn
