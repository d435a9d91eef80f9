#pragma once
// Random ops. Each one reserves exactly the words its shape needs from a
// named stream of a Generator (rng/distributions.h gives the counts), and
// the reservation goes on its tape node: running the node's forward again
// with it reproduces the output bit for bit, whatever the stream did since.
// dropout's node keeps only that reservation, not the mask: its backward
// regenerates the mask (as FlashAttention does). CPU, f32 and f64; element i
// is in row-major order of the shape.

#include <string_view>

#include "engine/tensor.h"
#include "rng/generator.h"

namespace reprise::ops {

// Uniform on (0, 1] (cuRAND's convention, one word per f32 element, two per f64).
Tensor rand(const Shape& shape, rng::Generator& gen = rng::default_generator(),
            std::string_view stream = "default", DType dtype = DType::f32);

// Standard normal by Box-Muller, in cuRAND's pairing.
Tensor randn(const Shape& shape, rng::Generator& gen = rng::default_generator(),
             std::string_view stream = "default", DType dtype = DType::f32);

// 1 with probability p, else 0; p in [0, 1].
Tensor bernoulli(const Shape& shape, double p, rng::Generator& gen = rng::default_generator(),
                 std::string_view stream = "default", DType dtype = DType::f32);

// Inverted dropout: each element kept with probability 1 - p and scaled by
// 1 / (1 - p), dropped elements exactly 0. Returns x itself (and reserves
// nothing) when !training or p == 0. p in [0, 1].
Tensor dropout(const Tensor& x, double p, rng::Generator& gen = rng::default_generator(),
               bool training = true, std::string_view stream = "dropout");

// Parameter initialisers: fill an existing tensor in place under no-grad
// (so a leaf that requires grad can be initialised) and return it.

// N(mean, std^2).
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0,
                rng::Generator& gen = rng::default_generator(), std::string_view stream = "init");

// Uniform on (low, high] (from the (0, 1] uniforms).
Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0,
                 rng::Generator& gen = rng::default_generator(), std::string_view stream = "init");

// N(mean, std^2) conditioned on [a, b], by inverting the normal CDF of a
// uniform on [Phi(alpha), Phi(beta)] (as PyTorch's trunc_normal_), so each
// element reads exactly two words: no rejection loop.
Tensor& trunc_normal_(Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0,
                      double b = 2.0, rng::Generator& gen = rng::default_generator(),
                      std::string_view stream = "init");

// PyTorch's kaiming_uniform_ in mode fan_in with the leaky_relu gain:
// bound = sqrt(2 / (1 + a^2)) * sqrt(3 / fan_in), fan_in = shape[1] times the
// receptive field (prod(shape[2:])). nn.Linear initialises weights with
// a = sqrt(5). Needs at least 2 dimensions.
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, rng::Generator& gen = rng::default_generator(),
                         std::string_view stream = "init");

}  // namespace reprise::ops
