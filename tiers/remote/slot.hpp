// SPDX-License-Identifier: Apache-2.0
// Redis Cluster key slots: CRC16 (XMODEM: polynomial 0x1021, initial 0, no reflection) of the
// key, or of its hash tag (the bytes between the first '{' and the next '}', when not empty),
// modulo 16384. As the cluster specification defines it, so that we route as the servers do.
#pragma once

#include <cstdint>
#include <string_view>

namespace cxltier::remote {

constexpr uint16_t kSlots = 16384;

uint16_t crc16(std::string_view bytes) noexcept;
uint16_t key_slot(std::string_view key) noexcept;

}  // namespace cxltier::remote
