// SPDX-License-Identifier: Apache-2.0
// The remote value format and key naming (value.hpp). Built with or without the remote client.
#include "tiers/remote/value.hpp"

#include "lib/runtime/remote.hpp"

#include <cxltier/error.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>

namespace cxltier::remote {

namespace {
uint64_t header_check_of(const ValueHeader &h) noexcept {
  return XXH3_64bits(&h, offsetof(ValueHeader, header_check));
}
}  // namespace

ValueHeader make_header(const Key &key, uint64_t ns_hash, const void *payload, size_t bytes) noexcept {
  ValueHeader h;
  h.payload_bytes = bytes;
  h.key_hi = key.hi;
  h.key_lo = key.lo;
  h.checksum = XXH3_64bits(payload, bytes);
  h.ns_hash = ns_hash;
  h.header_check = header_check_of(h);
  return h;
}

std::string check_header(const ValueHeader &h, const Key &key, uint64_t ns_hash, size_t bytes) {
  if (h.magic != kValueMagic) return "not a cxltier block (bad magic)";
  if (h.header_check != header_check_of(h)) return "the header's checksum does not match";
  if (h.version != kValueVersion) return "value format version " + std::to_string(h.version) + " (this library reads 1)";
  if (h.header_bytes != sizeof(ValueHeader)) return "header size " + std::to_string(h.header_bytes);
  if (h.payload_bytes != bytes)
    return "block of " + std::to_string(h.payload_bytes) + " bytes, this runtime's blocks have " + std::to_string(bytes);
  if (h.ns_hash != ns_hash) return "written under another namespace";
  if (h.key_hi != key.hi || h.key_lo != key.lo) return "holds block " + Key{h.key_hi, h.key_lo}.hex() + ", not " + key.hex();
  return "";
}

bool check_payload(const ValueHeader &h, const void *payload, size_t bytes) noexcept {
  return h.payload_bytes == bytes && XXH3_64bits(payload, bytes) == h.checksum;
}

uint64_t namespace_hash(std::string_view ns) noexcept { return XXH3_64bits(ns.data(), ns.size()); }

std::string block_key(std::string_view ns, const Key &key) {
  std::string k = "cxlt:";
  k.append(ns);
  k += ':';
  k += key.hex();
  return k;
}

}  // namespace cxltier::remote
