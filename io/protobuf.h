#pragma once
// A reader of the protocol buffers wire format, enough to read a
// SentencePiece ModelProto without the protobuf library: a message is a
// sequence of (field number, wire type, value) records, where the value is
// a varint, 4 or 8 little-endian bytes, or a length-prefixed byte string
// (a string, bytes, or a nested message).
//
//   ProtoReader r(bytes, "ModelProto");
//   while (r.next()) {
//     if (r.field() == 1) read_piece(ProtoReader(r.bytes(), "SentencePiece"));
//   }
//
// Every read is bounds-checked; a truncated or malformed record raises an
// Error naming the message and field.

#include <cstdint>
#include <string>
#include <string_view>

namespace reprise::io {

class ProtoReader {
 public:
  enum class WireType : uint8_t { varint = 0, fixed64 = 1, bytes = 2, fixed32 = 5 };

  // `message` names the message in errors.
  ProtoReader(std::string_view data, std::string message);

  // Reads the next record; false at the end of the data.
  bool next();

  uint32_t field() const { return field_; }
  WireType wire_type() const { return wire_type_; }

  // The value of the current record, checked against its wire type.
  uint64_t varint() const;
  bool boolean() const { return varint() != 0; }
  int32_t int32() const;  // int32 and enum fields (negative values are 10-byte varints)
  float fixed32_float() const;
  std::string_view bytes() const;

 private:
  void expect(WireType type) const;
  uint64_t read_varint();

  std::string_view data_;
  size_t pos_ = 0;
  std::string message_;
  uint32_t field_ = 0;
  WireType wire_type_ = WireType::varint;
  uint64_t value_ = 0;        // varint and fixed values
  std::string_view payload_;  // bytes values
};

}  // namespace reprise::io
