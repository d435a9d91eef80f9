#include "io/safetensors_folder.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "io/json.h"
#include "io/read_file.h"
#include "io/write_file.h"

namespace reprise::io {

namespace {

namespace fs = std::filesystem;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
// The shard names' %05d counters.
constexpr size_t kMaxWrittenShards = 99'999;

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

std::string path_in(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

// Whether `name` is present in dir, as a file or as a link (a Hub cache
// snapshot links every file to a blob; a dangling link still counts, so the
// Error is about opening it rather than about its absence).
bool present(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

// A shard name the index may use: one file name inside the folder.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string("/\0", 2)) == std::string::npos;
}

// model-00001-of-00003.safetensors, as the writer names shards.
std::string shard_name(size_t index, size_t count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buf;
}

bool is_shard_name(const std::string& name) {
  const std::string pattern = "model-#####-of-#####.safetensors";
  if (name.size() != pattern.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool ok = pattern[i] == '#' ? (name[i] >= '0' && name[i] <= '9') : name[i] == pattern[i];
    if (!ok) return false;
  }
  return true;
}

// metadata.total_size as a byte count: an integer, or a real holding a
// whole number (some writers store it as 1.5e10).
uint64_t total_size_of(const json::Value& v, const std::string& where) {
  if (v.is_int() && v.as_int() >= 0) return uint64_t(v.as_int());
  constexpr double kExact = 9007199254740992.0;  // 2^53: every whole double below is exact
  if (v.kind() == json::Kind::real && v.as_double() >= 0 && v.as_double() < kExact &&
      v.as_double() == double(uint64_t(v.as_double()))) {
    return uint64_t(v.as_double());
  }
  REPRISE_FAIL(where, ": metadata.total_size must be a non-negative whole number of bytes, got ",
               json::kind_name(v.kind()), v.is_number() ? " " + json::dump(v) : "");
}

// The index's JSON: an object with a "weight_map" object of at most
// kMaxSafetensorsFolderTensors entries.
json::Value parse_index(const std::string& index_path, const std::string& where) {
  const std::string text = read_file(index_path, kMaxSafetensorsIndexBytes, "a safetensors index");
  json::Value root;
  try {
    root = json::parse(text, {.max_depth = 4});
  } catch (const Error& e) {
    REPRISE_FAIL(where, ": bad JSON: ", e.what());
  }
  REPRISE_CHECK(root.is_object(), where, ": expected a JSON object, got ",
                json::kind_name(root.kind()));
  const json::Value* weight_map = root.find("weight_map");
  REPRISE_CHECK(weight_map != nullptr, where, ": no \"weight_map\"");
  REPRISE_CHECK(weight_map->is_object(), where,
                ": \"weight_map\" must be an object from tensor names to shard files, got ",
                json::kind_name(weight_map->kind()));
  const size_t entries = weight_map->as_object().size();
  REPRISE_CHECK(entries <= kMaxSafetensorsFolderTensors, where, ": weight_map has ", entries,
                " entries; reprise reads at most ", kMaxSafetensorsFolderTensors);
  return root;
}

// The weight map's shards, in the order it first names them, checked
// before any is opened.
struct ShardMap {
  std::vector<std::string> files;                // each shard's path
  std::map<std::string, size_t> shard_of;        // tensor -> index into files
  std::vector<const std::string*> first_tensor;  // per shard, the first tensor mapped to it
};

ShardMap map_shards(const json::Value& root, const std::string& dir, const std::string& where) {
  ShardMap map;
  std::map<std::string, size_t> shard_index;  // shard file name -> index into files
  for (const auto& [tensor, value] : root.find("weight_map")->as_object()) {
    REPRISE_CHECK(value.is_string(), where, ": weight_map entry ", in_quotes(tensor),
                  " must be a shard file name (a string), got ", json::kind_name(value.kind()));
    const std::string& file = value.as_string();
    auto [it, added] = shard_index.emplace(file, map.files.size());
    if (added) {
      // Quoted as JSON: a name may hold a NUL, which would end the message.
      REPRISE_CHECK(plain_file_name(file), where, ": tensor ", in_quotes(tensor), " is mapped to ",
                    json::dump(value), ", which is not a plain file name inside ", dir);
      REPRISE_CHECK(map.files.size() < kMaxSafetensorsShards, where,
                    ": weight_map names more than ", kMaxSafetensorsShards,
                    " shards; reprise reads at most ", kMaxSafetensorsShards);
      map.files.push_back(path_in(dir, file));
      map.first_tensor.push_back(&tensor);
    }
    map.shard_of.emplace(tensor, it->second);
  }
  return map;
}

// Every tensor the index maps is in its shard, and every tensor of a shard
// is mapped there, once. Returns the bytes the shards' tensors hold.
uint64_t check_shards_hold_the_index(const std::vector<SafetensorsFile>& shards,
                                     const std::vector<std::string>& files,
                                     const std::map<std::string, size_t>& shard_of,
                                     const std::string& index_path) {
  for (const auto& [tensor, s] : shard_of) {
    REPRISE_CHECK(shards[s].contains(tensor), "safetensors index ", index_path, " maps tensor ",
                  in_quotes(tensor), " to ", files[s], ", which does not hold it");
  }
  uint64_t bytes = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    for (const std::string& tensor : shards[s].names()) {
      auto it = shard_of.find(tensor);
      REPRISE_CHECK(it != shard_of.end(), "safetensors shard ", files[s], " holds tensor ",
                    in_quotes(tensor), ", which the index ", index_path, " does not list");
      REPRISE_CHECK(it->second == s, "safetensors shard ", files[s], " holds tensor ",
                    in_quotes(tensor), ", which the index ", index_path, " maps to ",
                    files[it->second], " (a tensor in two shards)");
    }
    bytes += shards[s].data_bytes();
  }
  return bytes;
}

// metadata.total_size, when the index has it, is what the shards hold.
void check_total_size(const json::Value& root, const std::string& where, uint64_t data_bytes) {
  const json::Value* metadata = root.find("metadata");
  if (!metadata) return;
  REPRISE_CHECK(metadata->is_object(), where, ": \"metadata\" must be an object, got ",
                json::kind_name(metadata->kind()));
  if (const json::Value* total = metadata->find("total_size")) {
    const uint64_t claimed = total_size_of(*total, where);
    REPRISE_CHECK(claimed == data_bytes, where, ": metadata.total_size is ", claimed,
                  " bytes but the shards' tensors hold ", data_bytes);
  }
}

}  // namespace

// ---- Reading ----

const SafetensorsFile& SafetensorsFolder::shard(const std::string& name) const {
  auto it = shard_of_.find(name);
  if (it != shard_of_.end()) return shards_[it->second];
  REPRISE_FAIL("safetensors folder ", dir_, ": no tensor ", in_quotes(name), "; the folder has ",
               describe_tensor_names(names_));
}

const TensorInfo& SafetensorsFolder::info(const std::string& name) const {
  return shard(name).info(name);
}

const std::string& SafetensorsFolder::file_of(const std::string& name) const {
  return shard(name).path();
}

Tensor SafetensorsFolder::get(const std::string& name) const { return shard(name).get(name); }

void SafetensorsFolder::read_into(const std::string& name, Tensor& dst) const {
  shard(name).read_into(name, dst);
}

SafetensorsFolder read_safetensors_folder(const std::string& dir) {
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  REPRISE_CHECK(fs::exists(status), "safetensors folder ", dir, ": no such directory");
  REPRISE_CHECK(fs::is_directory(status), "safetensors folder ", dir, ": not a directory");
  const std::string single = path_in(dir, kSingleFile);
  const std::string index_path = path_in(dir, kIndexFile);
  const bool has_single = present(single), has_index = present(index_path);
  REPRISE_CHECK(has_single || has_index, "safetensors folder: no ", kSingleFile, " or ", kIndexFile,
                " in ", dir);
  REPRISE_CHECK(!(has_single && has_index), "safetensors folder ", dir, ": both ", kSingleFile,
                " and ", kIndexFile,
                " are present, so which one holds the weights is ambiguous (remove the stale one)");

  SafetensorsFolder folder;
  folder.dir_ = dir;
  if (has_single) {
    folder.shards_.push_back(read_safetensors(single));
    folder.files_.push_back(single);
    for (const std::string& name : folder.shards_[0].names()) folder.shard_of_.emplace(name, 0);
    folder.data_bytes_ = folder.shards_[0].data_bytes();
    for (const auto& [name, shard] : folder.shard_of_) folder.names_.push_back(name);
    return folder;
  }

  const std::string where = "safetensors index " + index_path;
  const json::Value root = parse_index(index_path, where);
  ShardMap map = map_shards(root, dir, where);
  for (size_t s = 0; s < map.files.size(); ++s) {
    const std::string& path = map.files[s];
    REPRISE_CHECK(present(path), where, ": shard ", fs::path(path).filename().string(),
                  " (of tensor ", in_quotes(*map.first_tensor[s]), ") is missing from ", dir);
    folder.shards_.push_back(read_safetensors(path));
  }
  folder.files_ = std::move(map.files);
  folder.shard_of_ = std::move(map.shard_of);
  folder.data_bytes_ =
      check_shards_hold_the_index(folder.shards_, folder.files_, folder.shard_of_, index_path);
  check_total_size(root, where, folder.data_bytes_);
  for (const auto& [name, shard] : folder.shard_of_) folder.names_.push_back(name);
  return folder;
}

// ---- Writing ----

void write_safetensors_folder(const std::string& dir,
                              const std::vector<std::pair<std::string, Tensor>>& tensors,
                              const std::map<std::string, std::string>& metadata,
                              uint64_t max_shard_bytes) {
  const std::string where = "safetensors folder: writing " + dir;
  std::set<std::string> seen;
  for (const auto& [name, tensor] : tensors) {
    REPRISE_CHECK(name != "__metadata__", where, ": a tensor cannot be named __metadata__");
    REPRISE_CHECK(seen.insert(name).second, where, ": duplicate tensor name ", in_quotes(name));
    REPRISE_CHECK(tensor.defined(), where, ": tensor ", in_quotes(name), " is undefined");
  }

  // Shards as lists of indices into `tensors`, in huggingface_hub's order:
  // an oversized tensor's own shard is closed at once, before the one that
  // is still filling.
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  uint64_t current_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes = tensors[i].second.nbytes();
    if (bytes > max_shard_bytes) {
      shards.push_back({i});
      continue;
    }
    if (bytes > max_shard_bytes - current_bytes) {  // current_bytes + bytes > max, without overflow
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += bytes;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  REPRISE_CHECK(shards.size() <= kMaxWrittenShards, where, ": ", tensors.size(), " tensors at ",
                max_shard_bytes, " bytes per shard make ", shards.size(),
                " shards; shard names count to at most ", kMaxWrittenShards);

  create_directories_durable(dir);
  std::set<std::string> written;
  if (shards.size() <= 1) {
    write_safetensors(path_in(dir, kSingleFile), tensors, metadata);
    written.insert(kSingleFile);
  } else {
    std::map<std::string, std::string> weight_map;  // sorted, as transformers writes it
    int64_t parameters = 0;
    uint64_t total_size = 0;
    for (size_t s = 0; s < shards.size(); ++s) {
      const std::string file = shard_name(s, shards.size());
      std::vector<std::pair<std::string, Tensor>> part;
      for (size_t i : shards[s]) {
        part.push_back(tensors[i]);
        weight_map.emplace(tensors[i].first, file);
        parameters += tensors[i].second.numel();
        total_size += tensors[i].second.nbytes();
      }
      write_safetensors(path_in(dir, file), part, metadata);
      written.insert(file);
    }
    json::Object entries;
    for (auto& [name, file] : weight_map) entries.emplace_back(name, json::Value(file));
    const json::Value index(
        json::Object{{"metadata", json::Value(json::Object{{"total_parameters", parameters},
                                                           {"total_size", int64_t(total_size)}})},
                     {"weight_map", json::Value(std::move(entries))}});
    write_text_atomic(path_in(dir, kIndexFile), json::dump(index, 2) + "\n");
    written.insert(kIndexFile);
  }

  // The weight files of an earlier save in another layout or shard count,
  // listed first: removing entries while iterating a directory may skip some.
  std::vector<fs::path> stale;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool weights = name == kSingleFile || name == kIndexFile || is_shard_name(name);
    std::error_code ec;
    if (weights && !written.count(name) && !fs::is_directory(fs::symlink_status(e.path(), ec)))
      stale.push_back(e.path());
  }
  for (const fs::path& p : stale) {
    std::error_code ec;
    fs::remove(p, ec);
    REPRISE_CHECK(!ec, where, ": cannot remove the stale ", p.filename().string(), ": ",
                  ec.message());
  }
  if (!stale.empty())
    sync_parent_dir(path_in(dir, kIndexFile), where + ": the stale files are removed, but");
}

}  // namespace reprise::io
