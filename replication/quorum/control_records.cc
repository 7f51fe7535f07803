#include "replication/quorum/control_records.h"

#include "base/byte_io.h"
#include "base/bytes.h"
#include "io/batch_builder.h"
#include "io/record_batch.h"

namespace samsa::replication::quorum {
namespace {

constexpr std::int16_t kKeyVersion = 0;
constexpr std::int16_t kMessageVersion = 0;

io::Error corrupt(std::string what) {
  return io::Error{io::Errc::corrupt_batch, std::move(what)};
}

// ---- Kafka's flexible encoding, on top of ByteWriter/ByteReader ----

void put_uvarint(ByteWriter& w, std::uint32_t v) {
  std::byte buf[5];
  w.raw(buf, write_uvarint64(buf, v));
}

// Compact lengths are stored + 1 (0 is null, which none of these fields may be).
void put_compact_len(ByteWriter& w, std::size_t n) {
  put_uvarint(w, static_cast<std::uint32_t>(n + 1));
}

void put_compact_string(ByteWriter& w, const std::string& s) {
  put_compact_len(w, s.size());
  w.raw(s.data(), s.size());
}

// No tagged fields written: an empty tagged-field section.
void put_no_tags(ByteWriter& w) {
  put_uvarint(w, 0);
}

void put_voter_ids(ByteWriter& w, const std::vector<std::int32_t>& ids) {
  put_compact_len(w, ids.size());
  for (auto id : ids) {
    w.i32(id);
    put_no_tags(w);  // each Voter struct has its own
  }
}

std::vector<std::int32_t> get_voter_ids(ByteReader& r) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(r.array(true, 5)));
  for (auto& id : ids) {
    id = r.i32();
    r.skip_tags();
  }
  return ids;
}

void put_voters_record(ByteWriter& w, const VotersRecord& m) {
  put_compact_len(w, m.voters.size());
  for (const auto& v : m.voters) {
    w.i32(v.voter_id);
    w.raw(v.directory_id.data(), v.directory_id.size());
    put_compact_len(w, v.endpoints.size());
    for (const auto& e : v.endpoints) {
      put_compact_string(w, e.name);
      put_compact_string(w, e.host);
      w.i16(static_cast<std::int16_t>(e.port));
      put_no_tags(w);
    }
    // KRaftVersionFeature is a struct of its own: its tagged fields, then the voter's.
    w.i16(v.min_supported_version);
    w.i16(v.max_supported_version);
    put_no_tags(w);
    put_no_tags(w);
  }
}

VotersRecord get_voters_record(ByteReader& r) {
  VotersRecord m;
  // A voter takes at least id(4) + directory id(16) + endpoints(1) + feature(5) + tags(1).
  m.voters.resize(static_cast<std::size_t>(r.array(true, 27)));
  for (auto& v : m.voters) {
    v.voter_id = r.i32();
    auto id = r.raw(v.directory_id.size());
    for (std::size_t i = 0; i < id.size(); ++i)
      v.directory_id[i] = static_cast<std::uint8_t>(id[i]);
    v.endpoints.resize(static_cast<std::size_t>(r.array(true, 5)));
    for (auto& e : v.endpoints) {
      e.name = r.string(true);
      e.host = r.string(true);
      e.port = static_cast<std::uint16_t>(r.i16());
      r.skip_tags();
    }
    v.min_supported_version = r.i16();
    v.max_supported_version = r.i16();
    r.skip_tags();
    r.skip_tags();
  }
  return m;
}

const char* message_name(ControlRecordType t) {
  switch (t) {
    case ControlRecordType::leader_change:
      return "LeaderChangeMessage";
    case ControlRecordType::snapshot_header:
      return "SnapshotHeaderRecord";
    case ControlRecordType::snapshot_footer:
      return "SnapshotFooterRecord";
    case ControlRecordType::kraft_version:
      return "KRaftVersionRecord";
    case ControlRecordType::kraft_voters:
      return "VotersRecord";
    default:
      return "control record";
  }
}

// The fields after Version, for the type the key named.
io::Result<ControlMessage> decode_fields(ControlRecordType t, ByteReader& r) {
  switch (t) {
    case ControlRecordType::leader_change: {
      LeaderChangeMessage m;
      m.leader_id = r.i32();
      m.voters = get_voter_ids(r);
      m.granting_voters = get_voter_ids(r);
      return m;
    }
    case ControlRecordType::snapshot_header:
      return SnapshotHeaderRecord{r.i64()};
    case ControlRecordType::snapshot_footer:
      return SnapshotFooterRecord{};
    case ControlRecordType::kraft_version:
      return KRaftVersionRecord{r.i16()};
    case ControlRecordType::kraft_voters:
      return get_voters_record(r);
    default:
      return std::unexpected(corrupt("control record type " + std::to_string(static_cast<int>(t)) +
                                     " is not a KRaft control record"));
  }
}

}  // namespace

const char* control_type_name(ControlRecordType t) {
  switch (t) {
    case ControlRecordType::abort:
      return "ABORT";
    case ControlRecordType::commit:
      return "COMMIT";
    case ControlRecordType::leader_change:
      return "LEADER_CHANGE";
    case ControlRecordType::snapshot_header:
      return "SNAPSHOT_HEADER";
    case ControlRecordType::snapshot_footer:
      return "SNAPSHOT_FOOTER";
    case ControlRecordType::kraft_version:
      return "KRAFT_VERSION";
    case ControlRecordType::kraft_voters:
      return "KRAFT_VOTERS";
  }
  return "UNKNOWN";
}

ControlRecordType control_type(const ControlMessage& m) {
  struct V {
    ControlRecordType operator()(const LeaderChangeMessage&) const {
      return ControlRecordType::leader_change;
    }
    ControlRecordType operator()(const SnapshotHeaderRecord&) const {
      return ControlRecordType::snapshot_header;
    }
    ControlRecordType operator()(const SnapshotFooterRecord&) const {
      return ControlRecordType::snapshot_footer;
    }
    ControlRecordType operator()(const KRaftVersionRecord&) const {
      return ControlRecordType::kraft_version;
    }
    ControlRecordType operator()(const VotersRecord&) const {
      return ControlRecordType::kraft_voters;
    }
  };
  return std::visit(V{}, m);
}

std::vector<std::byte> encode_control_key(ControlRecordType t) {
  ByteWriter w;
  w.i16(kKeyVersion);
  w.i16(static_cast<std::int16_t>(t));
  return w.take();
}

std::vector<std::byte> encode_control_value(const ControlMessage& m) {
  ByteWriter w;
  w.i16(kMessageVersion);
  struct V {
    ByteWriter& w;
    void operator()(const LeaderChangeMessage& m) const {
      w.i32(m.leader_id);
      put_voter_ids(w, m.voters);
      put_voter_ids(w, m.granting_voters);
    }
    void operator()(const SnapshotHeaderRecord& m) const { w.i64(m.last_contained_log_timestamp); }
    void operator()(const SnapshotFooterRecord&) const {}
    void operator()(const KRaftVersionRecord& m) const { w.i16(m.kraft_version); }
    void operator()(const VotersRecord& m) const { put_voters_record(w, m); }
  };
  std::visit(V{w}, m);
  put_no_tags(w);
  return w.take();
}

io::Result<ControlMessage> decode_control_record(std::span<const std::byte> key,
                                                 std::span<const std::byte> value) {
  // Kafka's key schema has had one version; a longer key would be a version this code cannot
  // know the meaning of.
  if (key.size() != 4) {
    return std::unexpected(
        corrupt("control record key of " + std::to_string(key.size()) + " bytes, expected 4"));
  }
  const auto key_version = load_be<std::int16_t>(key.data());
  if (key_version != kKeyVersion) {
    return std::unexpected(
        corrupt("control record key version " + std::to_string(key_version) + ", expected 0"));
  }
  const auto type = static_cast<ControlRecordType>(load_be<std::int16_t>(key.data() + 2));
  const char* name = message_name(type);
  ByteReader r(value, name);
  const std::int16_t version = r.i16();
  if (r.ok() && version != kMessageVersion) {
    return std::unexpected(corrupt(std::string(name) + " version " + std::to_string(version) +
                                   " is not supported (only 0)"));
  }
  auto m = decode_fields(type, r);
  if (!m) return m;
  r.skip_tags();
  if (r.ok() && !r.at_end()) r.fail("bytes after the message");
  if (!r.ok()) return std::unexpected(corrupt(r.error()));
  return m;
}

std::size_t control_batch_size(const ControlMessage& m) {
  // A record: length, attributes, timestampDelta (0), offsetDelta (0), key, value, headers.
  const std::size_t value = encode_control_value(m).size();
  const std::size_t body =
      1 + 1 + 1 + varint_size(4) + 4 + varint_size(static_cast<std::int64_t>(value)) + value + 1;
  return io::batch::kHeaderSize + varint_size(static_cast<std::int64_t>(body)) + body;
}

io::Result<std::span<std::byte>> build_control_batch(std::span<std::byte> buffer,
                                                     const ControlMessage& m,
                                                     const ControlBatchOptions& opts) {
  io::BatchBuilder::Options bo;
  bo.base_offset = opts.base_offset;
  bo.partition_leader_epoch = opts.partition_leader_epoch;
  bo.control = true;
  if (buffer.size() < io::batch::kHeaderSize) {
    return std::unexpected(io::Error{io::Errc::invalid_length, "buffer smaller than a header"});
  }
  io::BatchBuilder b(buffer, bo);
  const auto key = encode_control_key(control_type(m));
  const auto value = encode_control_value(m);
  if (!b.add(opts.timestamp, std::span<const std::byte>(key), std::span<const std::byte>(value))) {
    return std::unexpected(
        io::Error{io::Errc::invalid_length, "buffer of " + std::to_string(buffer.size()) +
                                                " bytes too small for a " +
                                                control_type_name(control_type(m)) + " batch"});
  }
  return b.finish();
}

std::vector<std::byte> build_control_batch(const ControlMessage& m,
                                           const ControlBatchOptions& opts) {
  std::vector<std::byte> buf(control_batch_size(m));
  auto b = build_control_batch(buf, m, opts);
  // control_batch_size is exact, so this cannot fail; keep what was written either way.
  buf.resize(b ? b->size() : 0);
  return buf;
}

bool is_control_batch(std::span<const std::byte> batch) {
  if (batch.size() < io::batch::kHeaderSize) return false;
  return (load_be<std::int16_t>(batch.data() + io::batch::kAttributes) & io::batch::kControlBit) !=
         0;
}

io::Result<ControlMessage> decode_control_batch(std::span<const std::byte> batch) {
  auto info = io::batch::validate(batch, 0);
  if (!info) return std::unexpected(info.error());
  if (!info->is_control()) return std::unexpected(corrupt("not a control batch"));
  if (info->record_count != 1) {
    return std::unexpected(
        corrupt("control batch of " + std::to_string(info->record_count) + " records, expected 1"));
  }
  std::vector<std::byte> storage;
  auto records = io::batch::records_of(batch, storage);
  if (!records) return std::unexpected(records.error());
  io::batch::RecordReader reader(*records, 1);
  auto rec = reader.next();
  if (!rec) return std::unexpected(rec.error());
  if (!*rec) return std::unexpected(corrupt("control batch without its record"));
  const auto& r = **rec;
  if (!r.key || !r.value)
    return std::unexpected(corrupt("control record with a null key or value"));
  return decode_control_record(*r.key, *r.value);
}

}  // namespace samsa::replication::quorum
