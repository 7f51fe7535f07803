// ACL records of the __cluster_metadata log: Kafka's AccessControlEntryRecord (type 18) and
// RemoveAccessControlEntryRecord (type 19), both version 0. These functions handle only the
// fields, which follow the frame version / record type / record version header that
// metadata_records.cc writes; the fields are in Kafka's order, in metadata_records.h's encoding
// (big-endian; the id as 16 raw bytes; strings as int16 length + bytes; the enums as int8 wire
// codes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <vector>

#include "base/byte_io.h"
#include "replication/acl.h"
#include "replication/metadata_records.h"

namespace samsa::replication {

inline constexpr std::int16_t kAccessControlEntryRecordType = 18;
inline constexpr std::int16_t kRemoveAccessControlEntryRecordType = 19;

// The records themselves (AccessControlEntryRecord, RemoveAccessControlEntryRecord) are in
// metadata_records.h, in the MetadataRecord variant.

// Into / out of the writer and reader metadata_records.cc uses (for encode_record's visitor and
// decode_record's switch). An enum code Kafka does not know reads as UNKNOWN, as Kafka's
// StandardAcl.fromRecord reads it. A short read leaves the reader failed (r.ok() false).
void put_acl_record_fields(ByteWriter& w, const AccessControlEntryRecord& rec);
void put_acl_record_fields(ByteWriter& w, const RemoveAccessControlEntryRecord& rec);
AccessControlEntryRecord get_access_control_entry_fields(ByteReader& r);
RemoveAccessControlEntryRecord get_remove_access_control_entry_fields(ByteReader& r);

// Standalone: the fields alone, which must be the whole input (else why not).
std::vector<std::byte> encode_acl_record_fields(const AccessControlEntryRecord& rec);
std::vector<std::byte> encode_acl_record_fields(const RemoveAccessControlEntryRecord& rec);
std::expected<AccessControlEntryRecord, std::string> decode_access_control_entry_fields(
    std::span<const std::byte> fields);
std::expected<RemoveAccessControlEntryRecord, std::string>
decode_remove_access_control_entry_fields(std::span<const std::byte> fields);

}  // namespace samsa::replication
