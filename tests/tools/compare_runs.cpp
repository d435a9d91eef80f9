// compare_runs: checks that two training runs agree, for the CLI tests of
// several processes (examples/common/parallel_tests.cmake).
//
//   compare_runs states DIR_A DIR_B [MAX_ABS]
//     Every tensor of the two training checkpoints (parameters and
//     optimizer state, split moments put together; the metadata is not
//     compared): the same names,
//     shapes and dtypes, and bitwise the same values, or with MAX_ABS
//     floating values within MAX_ABS of each other.
//   compare_runs metrics A.jsonl B.jsonl FIELD[,FIELD...] [MAX_REL]
//     The same steps, and in each the same FIELDs where either logs them
//     (numbers bit for bit: the
//     JSON writer prints the shortest text that reads back to the same
//     double; arrays and objects equal), or with MAX_REL numbers within a
//     relative MAX_REL.
//
// Prints what it compared and the largest difference; exits 0 when the
// runs agree, 1 when not, 2 on bad arguments or unreadable files.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/json.h"
#include "nn/train_state.h"

namespace {

using namespace reprise;

int compare_states(const std::string& a_dir, const std::string& b_dir, double max_abs) {
  const std::vector<std::pair<std::string, Tensor>> a = nn::read_train_state_tensors(a_dir);
  const std::vector<std::pair<std::string, Tensor>> b = nn::read_train_state_tensors(b_dir);
  bool same_names = a.size() == b.size();
  for (size_t i = 0; same_names && i < a.size(); ++i) same_names = a[i].first == b[i].first;
  if (!same_names) {
    std::printf("the checkpoints hold different tensors (%zu and %zu)\n", a.size(), b.size());
    return 1;
  }
  double worst = 0;
  std::string worst_name;
  int64_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& name = a[i].first;
    const Tensor& x = a[i].second;
    const Tensor& y = b[i].second;
    if (x.shape() != y.shape() || x.dtype() != y.dtype()) {
      std::printf("%s: %s vs %s\n", name.c_str(), x.describe().c_str(), y.describe().c_str());
      return 1;
    }
    const std::vector<double> u = x.to_vector<double>(), v = y.to_vector<double>();
    double diff = 0;
    for (size_t k = 0; k < u.size(); ++k) diff = std::max(diff, std::fabs(u[k] - v[k]));
    if (std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) != 0) ++differing;
    if (diff > worst || worst_name.empty()) {
      worst = diff;
      worst_name = name;
    }
  }
  std::printf("%zu tensors, %lld differ; largest |a - b| = %.3g (%s)\n", a.size(),
              (long long)differing, worst, worst_name.c_str());
  if (max_abs < 0) return differing == 0 ? 0 : 1;
  return worst <= max_abs ? 0 : 1;
}

// The logged steps of a --metrics file.
std::vector<json::Value> read_steps(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) throw Error("cannot read '" + path + "'");
  std::vector<json::Value> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json::Value v = json::parse(line);
    // A session's first line holds its settings ({"config": ...}), not a step.
    if (v.find("step")) out.push_back(std::move(v));
  }
  return out;
}

int compare_metrics(const std::string& a_path, const std::string& b_path, const std::string& fields,
                    double max_rel) {
  const std::vector<json::Value> a = read_steps(a_path), b = read_steps(b_path);
  std::vector<std::string> names;
  std::stringstream list(fields);
  for (std::string f; std::getline(list, f, ',');) names.push_back(f);
  if (a.size() != b.size() || a.empty()) {
    std::printf("%zu and %zu logged steps\n", a.size(), b.size());
    return 1;
  }
  double worst = 0;
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i].at("step") == b[i].at("step"))) {
      std::printf("line %zu: steps %s and %s\n", i + 1, json::dump(a[i].at("step")).c_str(),
                  json::dump(b[i].at("step")).c_str());
      return 1;
    }
    for (const std::string& f : names) {
      const json::Value* x = a[i].find(f);
      const json::Value* y = b[i].find(f);
      if (x == nullptr && y == nullptr) continue;  // not logged at this step (val_loss)
      if (x == nullptr || y == nullptr) {
        std::printf("step %s: field %s missing\n", json::dump(a[i].at("step")).c_str(), f.c_str());
        return 1;
      }
      bool same = *x == *y;
      if (x->is_number() && y->is_number()) {
        const double u = x->as_double(), v = y->as_double();
        const double rel = std::fabs(u - v) / std::max(std::fabs(u), std::fabs(v));
        if (u != v) worst = std::max(worst, rel);
        same = u == v || (max_rel >= 0 && rel <= max_rel);
      }
      if (!same) {
        ++bad;
        std::printf("step %s: %s %s vs %s\n", json::dump(a[i].at("step")).c_str(), f.c_str(),
                    json::dump(*x).c_str(), json::dump(*y).c_str());
      }
    }
  }
  std::printf("%zu steps of %s: %s; largest relative difference %.3g\n", a.size(), fields.c_str(),
              bad == 0 ? "agree" : "differ", worst);
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() >= 3 && args.size() <= 4 && args[0] == "states") {
      return compare_states(args[1], args[2], args.size() == 4 ? std::stod(args[3]) : -1);
    }
    if (args.size() >= 4 && args.size() <= 5 && args[0] == "metrics") {
      return compare_metrics(args[1], args[2], args[3], args.size() == 5 ? std::stod(args[4]) : -1);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_runs: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr,
               "usage: compare_runs states DIR_A DIR_B [MAX_ABS]\n"
               "       compare_runs metrics A.jsonl B.jsonl FIELD[,FIELD...] [MAX_REL]\n");
  return 2;
}
