#include "ops/einsum.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "base/error.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/views.h"

namespace reprise::ops {
namespace {

// A subscript label: a letter's code, or kEllipsis + i for the i-th of the
// dims that "..." stands for (counted from the left of the widest one).
using Label = int;
using Labels = std::vector<Label>;
constexpr Label kEllipsis = 256;

std::string label_name(Label l) {
  return l >= kEllipsis ? "..." + std::to_string(l - kEllipsis) : std::string(1, char(l));
}

// One operand's subscript: its letters, and where "..." stands (-1: none).
struct Subscript {
  Labels letters;
  int64_t ellipsis_at = -1;
};

Subscript parse_subscript(const std::string& text, const std::string& equation) {
  Subscript s;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ') continue;
    if (c == '.') {
      REPRISE_CHECK(text.compare(i, 3, "...") == 0 && s.ellipsis_at < 0, "einsum: \"", equation,
                    "\": a subscript has one \"...\" at most, written as three dots");
      s.ellipsis_at = int64_t(s.letters.size());
      i += 2;
      continue;
    }
    REPRISE_CHECK(std::isalpha(static_cast<unsigned char>(c)), "einsum: \"", equation, "\": '", c,
                  "' is not a subscript (letters a-z, A-Z and \"...\")");
    s.letters.push_back(c);
  }
  return s;
}

// The labels of each dim of an operand of `rank` dims, "..." expanded to
// its trailing dims among `ellipsis_dims` ones.
Labels expand_subscript(const Subscript& s, int64_t rank, int64_t ellipsis_dims) {
  if (s.ellipsis_at < 0) return s.letters;
  const int64_t n = rank - int64_t(s.letters.size());
  Labels labels(s.letters.begin(), s.letters.begin() + s.ellipsis_at);
  for (int64_t i = 0; i < n; ++i) labels.push_back(kEllipsis + int(ellipsis_dims - n + i));
  labels.insert(labels.end(), s.letters.begin() + s.ellipsis_at, s.letters.end());
  return labels;
}

// A tensor with a label per dim.
struct Term {
  Tensor t;
  Labels labels;

  int64_t dim_of(Label l) const {
    return int64_t(std::find(labels.begin(), labels.end(), l) - labels.begin());
  }
  bool has(Label l) const { return dim_of(l) < int64_t(labels.size()); }
};

bool contains(const Labels& ls, Label l) { return std::find(ls.begin(), ls.end(), l) != ls.end(); }

// term's tensor with its dims in `order` and each size-1 dim expanded to
// the label's size.
Tensor arrange(const Term& term, const Labels& order, const std::map<Label, int64_t>& sizes) {
  std::vector<int64_t> perm;
  Shape shape;
  for (Label l : order) {
    perm.push_back(term.dim_of(l));
    shape.push_back(sizes.at(l));
  }
  Tensor t = permute(term.t, perm);
  return t.shape() == shape ? t : expand(t, shape);
}

int64_t label_product(const Labels& ls, const std::map<Label, int64_t>& sizes) {
  int64_t p = 1;
  for (Label l : ls) p *= sizes.at(l);
  return p;
}

// The product of a and b summed over the labels they share and `keep`
// lacks: a batched matmul (batch, left, shared) @ (batch, shared, right).
// Each side is laid out in its own order of those blocks where it can be,
// so a transposed view is read in place rather than copied.
Term contract(const Term& a, const Term& b, const Labels& keep,
              const std::map<Label, int64_t>& sizes) {
  Labels batch, summed, left, right;
  for (Label l : a.labels) {
    if (!b.has(l)) {
      left.push_back(l);
    } else {
      (contains(keep, l) ? batch : summed).push_back(l);
    }
  }
  for (Label l : b.labels)
    if (!a.has(l)) right.push_back(l);
  // Whether an operand's last own dim comes after its last summed one.
  const auto own_last = [&](const Term& t, const Labels& own) {
    if (own.empty() || summed.empty()) return false;
    return t.dim_of(own.back()) > t.dim_of(summed.back());
  };
  const auto concat = [](std::initializer_list<const Labels*> parts) {
    Labels out;
    for (const Labels* p : parts) out.insert(out.end(), p->begin(), p->end());
    return out;
  };
  const int64_t nb = label_product(batch, sizes), nl = label_product(left, sizes),
                nr = label_product(right, sizes), ns = label_product(summed, sizes);
  // a as (nb, nl, ns), b as (nb, ns, nr).
  Tensor am =
      own_last(a, left)
          ? transpose(reshape(arrange(a, concat({&batch, &summed, &left}), sizes), {nb, ns, nl}), 1,
                      2)
          : reshape(arrange(a, concat({&batch, &left, &summed}), sizes), {nb, nl, ns});
  Tensor bm =
      own_last(b, right) || summed.empty()
          ? reshape(arrange(b, concat({&batch, &summed, &right}), sizes), {nb, ns, nr})
          : transpose(reshape(arrange(b, concat({&batch, &right, &summed}), sizes), {nb, nr, ns}),
                      1, 2);
  Term out{.t = matmul(am, bm), .labels = concat({&batch, &left, &right})};
  Shape shape;
  for (Label l : out.labels) shape.push_back(sizes.at(l));
  out.t = reshape(out.t, shape);
  return out;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  // ---- parse: "in0,in1,...[->out]"
  const size_t arrow = equation.find("->");
  const std::string inputs = equation.substr(0, arrow);
  std::vector<Subscript> subs;
  for (size_t start = 0;;) {
    const size_t comma = inputs.find(',', start);
    subs.push_back(parse_subscript(inputs.substr(start, comma - start), equation));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  REPRISE_CHECK(subs.size() == operands.size(), "einsum: \"", equation, "\" has ", subs.size(),
                " subscripts for ", operands.size(), " operands");
  int64_t ellipsis_dims = 0;
  for (size_t i = 0; i < operands.size(); ++i) {
    const Tensor& t = operands[i];
    REPRISE_CHECK(t.defined(), "einsum: operand ", i, " is undefined");
    REPRISE_CHECK(t.dtype() == operands[0].dtype() && t.device() == operands[0].device() &&
                      is_floating(t.dtype()),
                  "einsum: operands must share one floating dtype and device; operand ", i, " is ",
                  t.describe(), ", operand 0 ", operands[0].describe());
    const int64_t letters = int64_t(subs[i].letters.size());
    REPRISE_CHECK(subs[i].ellipsis_at >= 0 ? t.dim() >= letters : t.dim() == letters, "einsum: \"",
                  equation, "\": operand ", i, " ", t.describe(), " has ", t.dim(),
                  " dims for a subscript of ", letters, " letters",
                  subs[i].ellipsis_at >= 0 ? " and \"...\"" : "");
    if (subs[i].ellipsis_at >= 0) ellipsis_dims = std::max(ellipsis_dims, t.dim() - letters);
  }
  std::vector<Term> terms;
  std::map<Label, int64_t> sizes;
  std::map<Label, int> uses;
  for (size_t i = 0; i < operands.size(); ++i) {
    Term term{.t = operands[i],
              .labels = expand_subscript(subs[i], operands[i].dim(), ellipsis_dims)};
    for (size_t d = 0; d < term.labels.size(); ++d) {
      const Label l = term.labels[d];
      REPRISE_CHECK(std::count(term.labels.begin(), term.labels.end(), l) == 1, "einsum: \"",
                    equation, "\": subscript ", label_name(l), " repeats in operand ", i,
                    " (diagonals are not supported)");
      const int64_t n = term.t.size(int64_t(d));
      auto [it, fresh] = sizes.emplace(l, n);
      REPRISE_CHECK(fresh || it->second == n || it->second == 1 || n == 1, "einsum: \"", equation,
                    "\": subscript ", label_name(l), " has size ", it->second, " and size ", n,
                    " (operand ", i, " ", term.t.describe(), ")");
      if (it->second == 1) it->second = n;
      ++uses[l];
    }
    terms.push_back(std::move(term));
  }
  Labels output;
  if (arrow == std::string::npos) {
    for (int64_t e = 0; e < ellipsis_dims; ++e) output.push_back(kEllipsis + int(e));
    for (const auto& [l, n] : uses)
      if (l < kEllipsis && n == 1) output.push_back(l);  // std::map: alphabetical
  } else {
    const Subscript out = parse_subscript(equation.substr(arrow + 2), equation);
    REPRISE_CHECK(out.ellipsis_at >= 0 || ellipsis_dims == 0, "einsum: \"", equation,
                  "\": the output needs \"...\" when an operand has it");
    output = expand_subscript(out, int64_t(out.letters.size()) + ellipsis_dims, ellipsis_dims);
    for (Label l : output) {
      REPRISE_CHECK(sizes.count(l) > 0, "einsum: \"", equation, "\": output subscript ",
                    label_name(l), " is in no operand");
      REPRISE_CHECK(std::count(output.begin(), output.end(), l) == 1, "einsum: \"", equation,
                    "\": output subscript ", label_name(l), " repeats");
    }
  }

  // ---- sum each label that only one operand has and the output lacks, then
  // contract left to right, keeping the labels still needed.
  for (Term& term : terms) {
    std::vector<int64_t> dims;
    Labels kept;
    for (size_t d = 0; d < term.labels.size(); ++d) {
      const Label l = term.labels[d];
      if (uses[l] == 1 && !contains(output, l)) {
        dims.push_back(int64_t(d));
      } else {
        kept.push_back(l);
      }
    }
    if (!dims.empty()) term = Term{.t = sum(term.t, dims), .labels = kept};
  }
  Term acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    Labels keep = output;
    for (size_t j = i + 1; j < terms.size(); ++j)
      keep.insert(keep.end(), terms[j].labels.begin(), terms[j].labels.end());
    acc = contract(acc, terms[i], keep, sizes);
  }
  return arrange(acc, output, sizes);
}

}  // namespace reprise::ops
