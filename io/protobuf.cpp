#include "io/protobuf.h"

#include <bit>
#include <cstring>
#include <utility>

#include "base/error.h"

namespace reprise::io {

static_assert(std::endian::native == std::endian::little,
              "io/protobuf reads fixed-width values as little-endian memory");

ProtoReader::ProtoReader(std::string_view data, std::string message)
    : data_(data), message_(std::move(message)) {}

uint64_t ProtoReader::read_varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    REPRISE_CHECK(pos_ < data_.size(), message_, ": truncated varint at byte ", pos_);
    const uint8_t b = uint8_t(data_[pos_++]);
    v |= uint64_t(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return v;
  }
  REPRISE_FAIL(message_, ": a varint longer than 10 bytes at byte ", pos_);
}

bool ProtoReader::next() {
  if (pos_ >= data_.size()) return false;
  const uint64_t key = read_varint();
  field_ = uint32_t(key >> 3);
  REPRISE_CHECK(field_ != 0 && (key >> 3) <= 0x1FFFFFFF, message_, ": invalid field number ",
                key >> 3, " at byte ", pos_);
  const uint64_t type = key & 7;
  auto fixed = [&](size_t n) {
    REPRISE_CHECK(data_.size() - pos_ >= n, message_, ": field ", field_, " is truncated");
    value_ = 0;
    std::memcpy(&value_, data_.data() + pos_, n);
    pos_ += n;
  };
  switch (type) {
    case 0:
      value_ = read_varint();
      break;
    case 1:
      fixed(8);
      break;
    case 2: {
      const uint64_t n = read_varint();
      REPRISE_CHECK(n <= data_.size() - pos_, message_, ": field ", field_, " claims ", n,
                    " bytes, but ", data_.size() - pos_, " remain");
      payload_ = data_.substr(pos_, size_t(n));
      pos_ += size_t(n);
      break;
    }
    case 5:
      fixed(4);
      break;
    default:  // 3 and 4 are the deprecated groups, which ModelProto does not use
      REPRISE_FAIL(message_, ": field ", field_, " has wire type ", type,
                   ", not one of varint, fixed64, bytes, fixed32");
  }
  wire_type_ = WireType(type);
  return true;
}

void ProtoReader::expect(WireType type) const {
  REPRISE_CHECK(wire_type_ == type, message_, ": field ", field_, " has wire type ",
                int(wire_type_), ", expected ", int(type));
}

uint64_t ProtoReader::varint() const {
  expect(WireType::varint);
  return value_;
}

int32_t ProtoReader::int32() const {
  expect(WireType::varint);
  return int32_t(uint32_t(value_));  // the low 32 bits, as protobuf truncates
}

float ProtoReader::fixed32_float() const {
  expect(WireType::fixed32);
  return std::bit_cast<float>(uint32_t(value_));
}

std::string_view ProtoReader::bytes() const {
  expect(WireType::bytes);
  return payload_;
}

}  // namespace reprise::io
