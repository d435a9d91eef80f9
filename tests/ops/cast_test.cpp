// cast: bf16/f16 rounding on known values (ties, the f16 maximum,
// subnormals, NaN), exhaustive 16-bit round trips, integer and bool casts,
// gradients between floating dtypes, PyTorch bit for bit. Its cases are in
// tests/cases/cast.cpp.
#include "ops/cast.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "autograd/backward.h"
#include "ops/reduce.h"
#include "tests/support/expect_error.h"
#include "tests/support/golden.h"
#include "tests/support/gradcheck.h"

namespace reprise::testing {
namespace {

using reprise::Tensor;

std::vector<uint16_t> bits16(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<uint16_t> out;
  for (int64_t i = 0; i < c.numel(); ++i)
    out.push_back(c.dtype() == DType::bf16 ? c.data<bfloat16>()[i].bits
                                           : c.data<float16>()[i].bits);
  return out;
}

// Every 16-bit pattern, as a tensor of `dtype` (bf16 or f16).
Tensor all_patterns(DType dtype) {
  Tensor t = Tensor::empty({65536}, dtype);
  for (uint32_t b = 0; b < 65536; ++b) {
    if (dtype == DType::bf16)
      t.data<bfloat16>()[b] = bfloat16::from_bits(uint16_t(b));
    else
      t.data<float16>()[b] = float16::from_bits(uint16_t(b));
  }
  return t;
}

bool is_nan16(uint16_t b, DType dtype) {
  return dtype == DType::bf16 ? (b & 0x7fff) > 0x7f80 : (b & 0x7fff) > 0x7c00;
}

struct Known {
  double value;
  uint16_t bits;
};

// Casts each value from `from` to `to` and compares the bits.
void expect_bits(DType from, DType to, const std::vector<Known>& cases) {
  std::vector<double> v;
  std::vector<uint16_t> want;
  for (const Known& k : cases) {
    v.push_back(k.value);
    want.push_back(k.bits);
  }
  Tensor x = Tensor::from_vector(v, {int64_t(v.size())}).to(from);
  std::vector<uint16_t> got = bits16(ops::cast(x, to));
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << dtype_name(from) << " " << cases[i].value << " -> "
                               << dtype_name(to) << ": got 0x" << std::hex << got[i]
                               << ", expected 0x" << want[i] << std::dec;
  }
}

TEST(Cast, Bf16RoundsToNearestEvenFromF32) {
  const double inf = std::numeric_limits<double>::infinity();
  expect_bits(DType::f32, DType::bf16,
              {
                  {1.0, 0x3f80},
                  {1 + 0x1p-8, 0x3f80},            // tie: down to the even 1.0
                  {1 + 3 * 0x1p-8, 0x3f82},        // tie: up to the even 1 + 2^-6
                  {1 + 0x1p-8 + 0x1p-20, 0x3f81},  // just past the tie
                  {-1 - 0x1p-8, 0xbf80},
                  {-0.0, 0x8000},
                  {inf, 0x7f80},
                  {-inf, 0xff80},
                  {std::numeric_limits<float>::max(), 0x7f80},  // past the largest bf16
                  {0x1p-133, 0x0001},                           // smallest subnormal
                  {0x1p-134, 0x0000},                           // tie with 0: even
                  {3 * 0x1p-134, 0x0002},                       // tie: even
              });
}

TEST(Cast, F16RoundsToNearestEvenFromF32) {
  expect_bits(DType::f32, DType::f16,
              {
                  {65504, 0x7bff},   // the largest f16
                  {65519, 0x7bff},   // below the halfway point 65520
                  {65520, 0x7c00},   // halfway: to even, which overflows to inf
                  {-65520, 0xfc00},  //
                  {1e6, 0x7c00},
                  {0x1p-24, 0x0001},            // smallest subnormal
                  {0x1p-25, 0x0000},            // tie with 0: even
                  {3 * 0x1p-25, 0x0002},        // tie: even
                  {0x1p-25 + 0x1p-35, 0x0001},  // past the tie
                  {0x1p-14, 0x0400},            // smallest normal
                  {0x1p-14 - 0x1p-24, 0x03ff},  // largest subnormal
                  {1 + 0x1p-11, 0x3c00},        // tie: even
                  {1 + 3 * 0x1p-11, 0x3c02},    // tie: even
                  {-0.0, 0x8000},
              });
}

// f64 and integer sources are rounded once. Going through f32 first (as
// PyTorch 2.15 does) turns a value just past a tie into the tie and then
// rounds it the wrong way.
TEST(Cast, WideSourcesRoundOnceNotThroughF32) {
  expect_bits(DType::f64, DType::bf16,
              {
                  {1 + 0x1p-8 + 0x1p-40, 0x3f81},  // torch: 0x3f80
                  {1 + 0x1p-8, 0x3f80},            // an exact tie is still even
                  {1e300, 0x7f80},
                  {-1e300, 0xff80},
                  {1e-300, 0x0000},
                  {-1e-300, 0x8000},
              });
  expect_bits(DType::f64, DType::f16,
              {
                  {1 + 0x1p-11 + 0x1p-40, 0x3c01},  // torch: 0x3c00
                  {65519.99999, 0x7bff},            // f32 would round it to 65520, then to inf
                  {65520.00001, 0x7c00},
              });
  const double big = 0x1p24 + 0x1p16 + 1;  // just past a bf16 tie; f32 rounds it onto the tie
  expect_bits(DType::i64, DType::bf16, {{big, 0x4b81}, {-big, 0xcb81}});  // torch: 0x4b80
  expect_bits(DType::i32, DType::bf16, {{big, 0x4b81}});
  expect_bits(DType::i32, DType::f16, {{65519, 0x7bff}, {65520, 0x7c00}, {-3, 0xc200}});
  Tensor extreme = Tensor::from_vector<int64_t>(
      {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}, {2});
  EXPECT_EQ(bits16(ops::cast(extreme, DType::bf16)), (std::vector<uint16_t>{0x5f00, 0xdf00}));
}

// The same single rounding in engine/dtype.h convert, which Tensor::copy_,
// fill_ and from_vector use: each value lies just past a 16-bit tie whose
// nearest f32 is the tie itself (through f32 they would round to even, the
// wrong way), or exactly on one. Subnormals and the overflow threshold too.
TEST(Cast, ConvertRoundsOnceFromF64AndIntegers) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Known> to_bf16{
      {1 + 0x1p-8 + 0x1p-40, 0x3f81},
      {1 + 0x1p-8, 0x3f80},
      {0x1p-134 + 0x1p-170, 0x0001},
      {-(0x1p-134 + 0x1p-170), 0x8001},
      {0x1p-134, 0x0000},
      {0x1p128 - 0x1p119 - 0x1p80, 0x7f7f},
      {0x1p128 - 0x1p119, 0x7f80},
      {-std::numeric_limits<double>::infinity(), 0xff80},
  };
  for (const Known& k : to_bf16)
    EXPECT_EQ(convert<bfloat16>(k.value).bits, k.bits) << std::hexfloat << k.value;
  const std::vector<Known> to_f16{
      {1 + 0x1p-11 + 0x1p-40, 0x3c01}, {0x1p-25 + 0x1p-60, 0x0001}, {0x1p-25, 0x0000},
      {65519.99999, 0x7bff},           {65520.0, 0x7c00},
  };
  for (const Known& k : to_f16)
    EXPECT_EQ(convert<float16>(k.value).bits, k.bits) << std::hexfloat << k.value;
  EXPECT_TRUE(std::isnan(float(convert<bfloat16>(nan))));
  EXPECT_TRUE(std::isnan(float(convert<float16>(nan))));

  const int64_t big = (int64_t(1) << 24) + (int64_t(1) << 16) + 1;  // f32 rounds it onto a tie
  EXPECT_EQ(convert<bfloat16>(big).bits, 0x4b81);
  EXPECT_EQ(convert<bfloat16>(-big).bits, 0xcb81);
  EXPECT_EQ(convert<bfloat16>(int32_t(big)).bits, 0x4b81);
  EXPECT_EQ(convert<float16>((int64_t(1) << 40) + 1).bits, 0x7c00);
  EXPECT_EQ(convert<float16>(int32_t(65519)).bits, 0x7bff);
  EXPECT_EQ(convert<bfloat16>(std::numeric_limits<int64_t>::min()).bits, 0xdf00);

  Tensor filled = Tensor::zeros({2}, DType::bf16).fill_(1 + 0x1p-8 + 0x1p-40);
  EXPECT_EQ(bits16(filled), (std::vector<uint16_t>{0x3f81, 0x3f81}));
  Tensor copied = Tensor::zeros({1}, DType::f16);
  copied.copy_(Tensor::from_vector<double>({1 + 0x1p-11 + 0x1p-40}, {1}));
  EXPECT_EQ(bits16(copied), (std::vector<uint16_t>{0x3c01}));
}

TEST(Cast, NaNStaysNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType from : {DType::f32, DType::f64}) {
    Tensor x = Tensor::from_vector<double>({nan, -nan}, {2}).to(from);
    for (DType to : {DType::bf16, DType::f16}) {
      Tensor y = ops::cast(x, to);
      for (uint16_t b : bits16(y)) EXPECT_TRUE(is_nan16(b, to)) << std::hex << b;
      for (double back : ops::cast(y, DType::f64).to_vector<double>())
        EXPECT_TRUE(std::isnan(back));
    }
  }
}

// Every bf16 and f16 value is exact in f32 and f64, so the round trip keeps
// every bit (NaNs stay NaN; a signalling one comes back quiet).
TEST(Cast, SixteenBitRoundTripsAreExact) {
  for (DType dtype : {DType::bf16, DType::f16}) {
    Tensor all = all_patterns(dtype);
    std::vector<uint16_t> want = bits16(all);
    for (DType wide : {DType::f32, DType::f64}) {
      std::vector<uint16_t> got = bits16(ops::cast(ops::cast(all, wide), dtype));
      for (size_t b = 0; b < want.size(); ++b) {
        if (is_nan16(want[b], dtype)) {
          EXPECT_TRUE(is_nan16(got[b], dtype)) << std::hex << want[b];
        } else {
          ASSERT_EQ(got[b], want[b]) << dtype_name(dtype) << " via " << dtype_name(wide);
        }
      }
    }
  }
  EXPECT_EQ(ops::cast(all_patterns(DType::f16), DType::f64).to_vector<double>()[0x3555],
            0.333251953125);
  std::vector<float> bf = ops::cast(all_patterns(DType::bf16), DType::f32).to_vector<float>();
  EXPECT_EQ(bf[0x3f80], 1.0f);
  EXPECT_EQ(bf[0x0001], 0x1p-133f);
  std::vector<float> hf = ops::cast(all_patterns(DType::f16), DType::f32).to_vector<float>();
  EXPECT_EQ(hf[0x0001], 0x1p-24f);
  EXPECT_EQ(hf[0x7bff], 65504.0f);
  EXPECT_EQ(hf[0xfc00], -std::numeric_limits<float>::infinity());
}

TEST(Cast, IntegerAndBoolCasts) {
  Tensor x = Tensor::from_vector<float>({-2.7f, 2.7f, -0.0f, 1e9f, 2147483520.0f}, {5});
  EXPECT_EQ(ops::cast(x, DType::i32).to_vector<int32_t>(),
            (std::vector<int32_t>{-2, 2, 0, 1000000000, 2147483520}));
  EXPECT_EQ(ops::cast(Tensor::from_vector<float>({3e9f}, {1}), DType::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{3000000000}));
  EXPECT_EQ(ops::cast(Tensor::from_vector<double>({-0x1p63}, {1}), DType::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(ops::cast(Tensor::from_vector<int64_t>({-5, 7}, {2}), DType::i32).to_vector<int32_t>(),
            (std::vector<int32_t>{-5, 7}));
  Tensor b = ops::cast(
      Tensor::from_vector<float>({0.f, -0.f, 0.5f, std::numeric_limits<float>::quiet_NaN()}, {4}),
      DType::boolean);
  EXPECT_FALSE(b.data<bool>()[0]);
  EXPECT_FALSE(b.data<bool>()[1]);
  EXPECT_TRUE(b.data<bool>()[2]);
  EXPECT_TRUE(b.data<bool>()[3]);
  EXPECT_EQ(ops::cast(b, DType::f32).to_vector<float>(), (std::vector<float>{0, 0, 1, 1}));
  EXPECT_EQ(
      ops::cast(Tensor::from_vector<int32_t>({-7, 16777217}, {2}), DType::f64).to_vector<double>(),
      (std::vector<double>{-7, 16777217}));
  // A transposed view.
  Tensor m = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
  EXPECT_EQ(ops::cast(m, DType::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
}

TEST(Cast, UnrepresentableIntegersRaise) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_error(
      [&] {
        ops::cast(Tensor::from_vector<float>({1, nan}, {2}), DType::i32);
      },
      {"cast", "nan", "f32[2]", "i32"});
  expect_error([&] { ops::cast(Tensor::from_vector<float>({3e9f}, {1}), DType::i32); },
               {"cast", "3e+09", "i32"});
  expect_error([&] { ops::cast(Tensor::from_vector<float>({2147483648.0f}, {1}), DType::i32); },
               {"cast", "i32"});
  expect_error(
      [&] {
        ops::cast(Tensor::from_vector<double>({std::numeric_limits<double>::infinity()}, {1}),
                  DType::i64);
      },
      {"cast", "inf", "f64[1]", "i64"});
  expect_error([&] { ops::cast(Tensor::from_vector<double>({0x1p63}, {1}), DType::i64); },
               {"cast", "i64"});
  expect_error(
      [&] {
        ops::cast(Tensor::from_vector<int64_t>({0, int64_t(1) << 40}, {2}), DType::i32);
      },
      {"cast", "1099511627776", "i64[2]", "i32"});
}

TEST(Cast, GradientIsCastBack) {
  Tensor x = Tensor::from_vector<float>({0.1f, -2.f, 3.f}, {3}).requires_grad(true);
  Tensor y = ops::cast(x, DType::bf16);
  EXPECT_TRUE(y.requires_grad());
  autograd::backward(ops::sum(ops::cast(y, DType::f64)));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 1, 1}));
  // A bf16 leaf gets a bf16 gradient.
  Tensor h = Tensor::from_vector<float>({1, 2}, {2}).to(DType::bf16).requires_grad(true);
  autograd::backward(ops::sum(ops::cast(h, DType::f32)));
  EXPECT_EQ(h.grad().dtype(), DType::bf16);
  EXPECT_EQ(bits16(h.grad()), (std::vector<uint16_t>{0x3f80, 0x3f80}));
  // Same dtype: a new handle on the same data, still differentiable.
  Tensor same = ops::cast(x, DType::f32);
  EXPECT_FALSE(same.is_same(x));
  EXPECT_EQ(same.storage(), x.storage());
  EXPECT_TRUE(same.requires_grad());
  // To integers: no gradient.
  EXPECT_FALSE(ops::cast(x, DType::i64).requires_grad());
}

// f32 -> bf16 and f16 as PyTorch rounds them (tests/fixtures/golden_index_ops.py):
// random magnitudes, subnormals, exact ties with random high bits, specials.
TEST(Cast, MatchesPyTorchBitForBit) {
  std::map<std::string, Tensor> g = load_golden("index_ops.safetensors");
  const Tensor& x = g.at("cast.x");
  for (DType to : {DType::bf16, DType::f16}) {
    std::vector<uint16_t> want = bits16(g.at(to == DType::bf16 ? "cast.bf16" : "cast.f16"));
    std::vector<uint16_t> got = bits16(ops::cast(x, to));
    std::vector<float> xv = x.to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      bool same = is_nan16(want[i], to) ? is_nan16(got[i], to) : got[i] == want[i];
      if (!same && bad++ < 5)
        ADD_FAILURE() << dtype_name(to) << " of " << xv[i] << ": got 0x" << std::hex << got[i]
                      << ", torch 0x" << want[i];
    }
    EXPECT_EQ(bad, 0);
  }
}

}  // namespace
}  // namespace reprise::testing
