// SPDX-License-Identifier: Apache-2.0
// CRC16 and the key slot of Redis Cluster (see slot.hpp). Table-driven, one byte per step.
#include "tiers/remote/slot.hpp"

#include <array>

namespace cxltier::remote {

namespace {

constexpr std::array<uint16_t, 256> make_table() {
  std::array<uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    uint16_t c = static_cast<uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b) c = static_cast<uint16_t>((c & 0x8000) ? (c << 1) ^ 0x1021 : c << 1);
    t[i] = c;
  }
  return t;
}

constexpr std::array<uint16_t, 256> kTable = make_table();

}  // namespace

uint16_t crc16(std::string_view bytes) noexcept {
  uint16_t crc = 0;
  for (unsigned char c : bytes) crc = static_cast<uint16_t>((crc << 8) ^ kTable[((crc >> 8) ^ c) & 0xff]);
  return crc;
}

uint16_t key_slot(std::string_view key) noexcept {
  size_t open = key.find('{');
  if (open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    // "{}" (an empty tag) hashes the whole key, as the servers do.
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return static_cast<uint16_t>(crc16(key) & (kSlots - 1));
}

}  // namespace cxltier::remote
