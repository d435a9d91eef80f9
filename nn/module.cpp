#include "nn/module.h"

#include <algorithm>

#include "engine/grad_mode.h"

namespace reprise::nn {

Module::Module(std::string name) : name_(std::move(name)) {
  REPRISE_CHECK(name_.find('.') == std::string::npos, "Module: name '", name_,
                "' contains a '.'; a module name is one path component");
}

void Module::check_new_name(const std::string& name) const {
  REPRISE_CHECK(!name.empty() && name.find('.') == std::string::npos, "Module '", name_,
                "': bad parameter or child name '", name, "'");
  for (const Entry& p : params_) {
    REPRISE_CHECK(p.name != name, "Module '", name_, "': a parameter named '", name,
                  "' already exists");
  }
  for (const NamedBuffer& b : buffers_) {
    REPRISE_CHECK(b.name != name, "Module '", name_, "': a buffer named '", name,
                  "' already exists");
  }
  for (const Module* c : children_) {
    REPRISE_CHECK(c->name() != name, "Module '", name_, "': a child named '", name,
                  "' already exists");
  }
}

Tensor Module::register_parameter(std::string name, const Shape& shape, bool decay) {
  check_new_name(name);
  Tensor t = Tensor::zeros(shape, DType::f32);
  t.storage()->set_kind(MemoryKind::parameter);
  t.requires_grad(true);
  params_.push_back({std::move(name), t, decay});
  return t;
}

Tensor Module::register_buffer(std::string name, const Shape& shape) {
  check_new_name(name);
  Tensor t = Tensor::zeros(shape, DType::f32);
  t.storage()->set_kind(MemoryKind::parameter);
  buffers_.push_back({std::move(name), t});
  return t;
}

void Module::register_module(Module& child) {
  check_new_name(child.name());
  children_.push_back(&child);
}

std::string Module::path(const std::string& prefix) const {
  return name_.empty() ? prefix : (prefix.empty() ? name_ : prefix + "." + name_);
}

void Module::collect(const std::string& prefix, std::vector<NamedParameter>& out) const {
  const std::string here = path(prefix), dot = here.empty() ? "" : here + ".";
  for (const Entry& p : params_) out.push_back({dot + p.name, p.value, p.decay});
  for (const Module* c : children_) c->collect(here, out);
}

void Module::collect_buffers(const std::string& prefix, std::vector<NamedBuffer>& out) const {
  const std::string here = path(prefix), dot = here.empty() ? "" : here + ".";
  for (const NamedBuffer& b : buffers_) out.push_back({dot + b.name, b.value});
  for (const Module* c : children_) c->collect_buffers(here, out);
}

std::vector<NamedBuffer> Module::buffers() const {
  std::vector<NamedBuffer> out;
  collect_buffers("", out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_state() const {
  std::vector<std::pair<std::string, Tensor>> out = named_parameters();
  for (NamedBuffer& b : buffers()) out.emplace_back(std::move(b.name), b.value);
  return out;
}

std::vector<NamedParameter> Module::parameters() const {
  std::vector<NamedParameter> out;
  collect("", out);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (NamedParameter& p : parameters()) out.emplace_back(std::move(p.name), p.value);
  return out;
}

Tensor Module::parameter(std::string_view full_name) const {
  std::vector<NamedParameter> all = parameters();
  for (const NamedParameter& p : all) {
    if (p.name == full_name) return p.value;
  }
  // Suggest names that share the longest prefix with the one asked for.
  auto common = [&](const std::string& s) {
    size_t n = 0;
    while (n < s.size() && n < full_name.size() && s[n] == full_name[n]) ++n;
    return n;
  };
  std::stable_sort(all.begin(), all.end(), [&](const NamedParameter& a, const NamedParameter& b) {
    return common(a.name) > common(b.name);
  });
  std::string near;
  for (size_t i = 0; i < all.size() && i < 3; ++i) near += (i ? ", " : "") + all[i].name;
  REPRISE_FAIL("Module '", name_, "': no parameter named '", full_name, "' (closest: ", near, ")");
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const NamedParameter& p : parameters()) n += p.value.numel();
  return n;
}

void Module::zero_grad() {
  for (NamedParameter& p : parameters()) p.value.set_grad(Tensor());
}

void Module::train(bool on) {
  training_ = on;
  for (Module* c : children_) c->train(on);
}

}  // namespace reprise::nn
