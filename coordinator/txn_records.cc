#include "coordinator/txn_records.h"

#include <array>

#include "base/byte_io.h"

namespace samsa::coordinator {
namespace {

constexpr std::array<std::string_view, 8> kNames = {
    "Empty",          "Ongoing",       "PrepareCommit", "PrepareAbort",
    "CompleteCommit", "CompleteAbort", "Dead",          "PrepareEpochFence"};

}  // namespace

std::string_view txn_state_name(TxnState s) {
  const auto i = static_cast<std::size_t>(s);
  return i < kNames.size() ? kNames[i] : "Unknown";
}

std::optional<TxnState> txn_state_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i].size() != name.size()) continue;
    bool same = true;
    for (std::size_t k = 0; k < name.size() && same; ++k)
      same = std::tolower(static_cast<unsigned char>(kNames[i][k])) ==
             std::tolower(static_cast<unsigned char>(name[k]));
    if (same) return static_cast<TxnState>(i);
  }
  return std::nullopt;
}

Bytes encode_txn_key(std::string_view transactional_id) {
  ByteWriter w;
  w.i16(0);
  w.string(transactional_id);
  return w.take();
}

Bytes encode_txn_value(const TxnValue& v) {
  const bool v1 = v.previous_producer_id >= 0 || v.next_producer_id >= 0 ||
                  v.next_producer_epoch >= 0 || v.client_transaction_version != 0;
  ByteWriter w;
  w.i16(v1 ? 1 : 0);
  w.i64(v.producer_id);
  w.i16(v.producer_epoch);
  w.i32(v.timeout_ms);
  w.i8(static_cast<std::int8_t>(v.state));
  if (v1) {
    w.compact_array_length(v.partitions.size());
    for (const auto& [topic, parts] : v.partitions) {
      w.compact_string(topic);
      w.compact_array_length(parts.size());
      for (std::int32_t p : parts)
        w.i32(p);
      w.uvarint(0);  // the entry's tagged fields
    }
  } else {
    w.i32(static_cast<std::int32_t>(v.partitions.size()));
    for (const auto& [topic, parts] : v.partitions) {
      w.string(topic);
      w.i32(static_cast<std::int32_t>(parts.size()));
      for (std::int32_t p : parts)
        w.i32(p);
    }
  }
  w.i64(v.last_update_ms);
  w.i64(v.start_ms);
  if (v1) {
    // Tagged fields in tag order, only those that differ from their defaults.
    const bool has[4] = {v.previous_producer_id >= 0, v.next_producer_id >= 0,
                         v.client_transaction_version != 0, v.next_producer_epoch >= 0};
    w.uvarint(static_cast<std::uint64_t>(has[0] + has[1] + has[2] + has[3]));
    auto tag64 = [&w](int tag, std::int64_t x) {
      w.uvarint(static_cast<std::uint64_t>(tag));
      w.uvarint(8);
      w.i64(x);
    };
    auto tag16 = [&w](int tag, std::int16_t x) {
      w.uvarint(static_cast<std::uint64_t>(tag));
      w.uvarint(2);
      w.i16(x);
    };
    if (has[0]) tag64(0, v.previous_producer_id);
    if (has[1]) tag64(1, v.next_producer_id);
    if (has[2]) tag16(2, v.client_transaction_version);
    if (has[3]) tag16(3, v.next_producer_epoch);
  }
  return w.take();
}

std::expected<std::string, std::string> decode_txn_key(std::span<const std::byte> b) {
  ByteReader r(b, "transaction log record");
  const std::int16_t version = r.i16();
  if (r.ok() && version != 0)
    return std::unexpected("transaction log key version " + std::to_string(version));
  std::string id = r.string(false);
  if (r.ok() && !r.at_end()) r.fail("trailing bytes");
  if (!r.ok()) return std::unexpected(r.error());
  return id;
}

std::expected<TxnValue, std::string> decode_txn_value(std::span<const std::byte> b) {
  ByteReader r(b, "transaction log record");
  const std::int16_t version = r.i16();
  if (r.ok() && version != 0 && version != 1)
    return std::unexpected("transaction log value version " + std::to_string(version));
  const bool flexible = version >= 1;
  TxnValue v;
  v.producer_id = r.i64();
  v.producer_epoch = r.i16();
  v.timeout_ms = r.i32();
  v.state = static_cast<TxnState>(r.i8());
  // Null (Kafka writes it for Empty) reads as no partitions.
  const std::int64_t topics =
      flexible ? static_cast<std::int64_t>(r.uvarint()) - 1 : std::int64_t{r.i32()};
  for (std::int64_t t = 0; r.ok() && t < topics; ++t) {
    std::string topic = r.string(flexible);
    const std::int64_t n = r.array(flexible, 4);
    auto& parts = v.partitions[topic];
    for (std::int64_t i = 0; r.ok() && i < n; ++i)
      parts.insert(r.i32());
    if (flexible) r.skip_tags();
  }
  v.last_update_ms = r.i64();
  v.start_ms = r.i64();
  if (flexible) {
    const std::uint32_t count = r.uvarint();
    for (std::uint32_t i = 0; i < count && r.ok(); ++i) {
      const std::uint32_t tag = r.uvarint();
      const std::uint32_t size = r.uvarint();
      auto field = r.raw(size);
      if (!r.ok()) break;
      ByteReader f(field, "transaction log record tagged field");
      switch (tag) {
        case 0:
          v.previous_producer_id = f.i64();
          break;
        case 1:
          v.next_producer_id = f.i64();
          break;
        case 2:
          v.client_transaction_version = f.i16();
          break;
        case 3:
          v.next_producer_epoch = f.i16();
          break;
        default:
          continue;  // a newer version's field
      }
      if (!f.ok()) r.fail("tagged field " + std::to_string(tag) + ": " + f.error());
    }
  }
  if (r.ok() && !r.at_end()) r.fail("trailing bytes");
  if (!r.ok()) return std::unexpected(r.error());
  return v;
}

}  // namespace samsa::coordinator
