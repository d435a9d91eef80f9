// Fits y = x * w (w broadcast over rows) to a target by gradient descent, using
// reprise as an installed library. Exits non-zero unless the loss falls.
#include <cstdio>

#include "autograd/backward.h"
#include "ops/binary.h"
#include "ops/reduce.h"

using namespace reprise;

int main() {
  // x: (8, 4), w: (4,) broadcast over rows; target: (8, 4)
  std::vector<float> xs(32), ts(32);
  for (int i = 0; i < 32; ++i) {
    xs[i] = float(i % 7) / 7.0f - 0.4f;
    ts[i] = 0.5f * xs[i];
  }
  Tensor x = Tensor::from_vector(xs, {8, 4});
  Tensor target = Tensor::from_vector(ts, {8, 4});
  Tensor w = Tensor::full({4}, 0.1f).requires_grad(true);

  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    Tensor diff = ops::sub(ops::mul(x, w), target);
    Tensor loss = ops::mean(ops::mul(diff, diff));
    autograd::backward(loss);
    {
      NoGradGuard no_grad;  // the update itself is not part of the graph
      w.copy_(ops::sub(w, ops::mul(w.grad(), 0.5)));
      w.set_grad(Tensor());
    }
    float value = loss.item<float>();
    if (step == 0) first = value;
    last = value;
  }
  std::printf("embed example: loss %.6f -> %.6f\n", first, last);
  return last < 0.01f * first ? 0 : 1;
}
