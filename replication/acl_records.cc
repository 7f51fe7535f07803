#include "replication/acl_records.h"

namespace samsa::replication {
namespace {

void put_id(ByteWriter& w, const Uuid& id) {
  w.raw(id.data(), id.size());
}

Uuid get_id(ByteReader& r) {
  Uuid id{};
  auto b = r.raw(id.size());
  for (std::size_t i = 0; i < b.size(); ++i)
    id[i] = static_cast<std::uint8_t>(b[i]);
  return id;
}

template <class Rec>
std::expected<Rec, std::string> finish(ByteReader& r, Rec rec) {
  if (r.ok() && !r.at_end()) r.fail("trailing bytes");
  if (!r.ok()) return std::unexpected(r.error());
  return rec;
}

}  // namespace

void put_acl_record_fields(ByteWriter& w, const AccessControlEntryRecord& rec) {
  const AclBinding& b = rec.binding;
  put_id(w, rec.id);
  w.i8(code(b.resource_type));
  w.string(b.resource_name);
  w.i8(code(b.pattern_type));
  w.string(b.principal);
  w.string(b.host);
  w.i8(code(b.operation));
  w.i8(code(b.permission));
}

void put_acl_record_fields(ByteWriter& w, const RemoveAccessControlEntryRecord& rec) {
  put_id(w, rec.id);
}

AccessControlEntryRecord get_access_control_entry_fields(ByteReader& r) {
  AccessControlEntryRecord rec;
  AclBinding& b = rec.binding;
  rec.id = get_id(r);
  b.resource_type = resource_type_from_code(r.i8());
  b.resource_name = r.string(false);
  b.pattern_type = pattern_type_from_code(r.i8());
  b.principal = r.string(false);
  b.host = r.string(false);
  b.operation = acl_operation_from_code(r.i8());
  b.permission = acl_permission_type_from_code(r.i8());
  return rec;
}

RemoveAccessControlEntryRecord get_remove_access_control_entry_fields(ByteReader& r) {
  return RemoveAccessControlEntryRecord{get_id(r)};
}

std::vector<std::byte> encode_acl_record_fields(const AccessControlEntryRecord& rec) {
  ByteWriter w;
  put_acl_record_fields(w, rec);
  return w.take();
}

std::vector<std::byte> encode_acl_record_fields(const RemoveAccessControlEntryRecord& rec) {
  ByteWriter w;
  put_acl_record_fields(w, rec);
  return w.take();
}

std::expected<AccessControlEntryRecord, std::string> decode_access_control_entry_fields(
    std::span<const std::byte> fields) {
  ByteReader r(fields, "AccessControlEntryRecord");
  auto rec = get_access_control_entry_fields(r);
  return finish(r, std::move(rec));
}

std::expected<RemoveAccessControlEntryRecord, std::string>
decode_remove_access_control_entry_fields(std::span<const std::byte> fields) {
  ByteReader r(fields, "RemoveAccessControlEntryRecord");
  auto rec = get_remove_access_control_entry_fields(r);
  return finish(r, rec);
}

}  // namespace samsa::replication
