// SPDX-License-Identifier: Apache-2.0
// What one block looks like in the remote store. Key: "cxlt:<namespace>:<32 hex digits of the
// 128-bit identity key>", so two models, geometries, dtypes, tensor-parallel ranks or fleets
// never read each other's bytes. Value: a 64-byte header, then the block's bytes. The header
// is checked on every read (magic, version, sizes, key, namespace, its own checksum) and so is
// the payload (XXH3-64): any mismatch makes the read a miss, never a block.
#pragma once

#include "lib/runtime/remote.hpp"

#include <cxltier/key.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cxltier::remote {

constexpr uint64_t kValueMagic = 0x314b4c42544c5843ull;  // "CXLTBLK1" read as little-endian bytes
constexpr uint32_t kValueVersion = 1;

// Little-endian on the wire (the library runs on x86-64 and AArch64 Linux only).
struct ValueHeader {
  uint64_t magic = kValueMagic;
  uint32_t version = kValueVersion;
  uint32_t header_bytes = sizeof(ValueHeader);
  uint64_t payload_bytes = 0;
  uint64_t key_hi = 0;
  uint64_t key_lo = 0;
  uint64_t checksum = 0;      // XXH3-64 of the payload
  uint64_t ns_hash = 0;       // XXH3-64 of the namespace
  uint64_t header_check = 0;  // XXH3-64 of the 56 bytes above
};
static_assert(sizeof(ValueHeader) == 64, "the header is 64 bytes on the wire");

// The header of a block (hashes the payload: about 0.3 ms for 5 MiB).
ValueHeader make_header(const Key &key, uint64_t ns_hash, const void *payload, size_t bytes) noexcept;

// Why a value was refused ("" when the header fits): checked before the payload is read.
std::string check_header(const ValueHeader &h, const Key &key, uint64_t ns_hash, size_t bytes);
// The payload's checksum against the header's.
bool check_payload(const ValueHeader &h, const void *payload, size_t bytes) noexcept;

uint64_t namespace_hash(std::string_view ns) noexcept;
// "cxlt:<ns>:<hex>".
std::string block_key(std::string_view ns, const Key &key);
// check_namespace() is the core's (lib/runtime/remote.hpp).

}  // namespace cxltier::remote
