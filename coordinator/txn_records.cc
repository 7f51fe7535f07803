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
  ByteWriter w;
  w.i16(0);
  w.i64(v.producer_id);
  w.i16(v.producer_epoch);
  w.i32(v.timeout_ms);
  w.i8(static_cast<std::int8_t>(v.state));
  w.i32(static_cast<std::int32_t>(v.partitions.size()));
  for (const auto& [topic, parts] : v.partitions) {
    w.string(topic);
    w.i32(static_cast<std::int32_t>(parts.size()));
    for (std::int32_t p : parts)
      w.i32(p);
  }
  w.i64(v.last_update_ms);
  w.i64(v.start_ms);
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
  TxnValue v;
  v.producer_id = r.i64();
  if (version >= 1) {
    // v1 (flexible) is Kafka 4's with KIP-890's fields as tagged fields; samsa writes v0.
    return std::unexpected(std::string("transaction log value version 1 is not read yet"));
  }
  v.producer_epoch = r.i16();
  v.timeout_ms = r.i32();
  v.state = static_cast<TxnState>(r.i8());
  const std::int32_t topics = r.i32();
  for (std::int32_t t = 0; r.ok() && t < topics; ++t) {
    std::string topic = r.string(false);
    const std::int32_t n = r.i32();
    auto& parts = v.partitions[topic];
    for (std::int32_t i = 0; r.ok() && i < n; ++i)
      parts.insert(r.i32());
  }
  v.last_update_ms = r.i64();
  v.start_ms = r.i64();
  if (r.ok() && !r.at_end()) r.fail("trailing bytes");
  if (!r.ok()) return std::unexpected(r.error());
  return v;
}

}  // namespace samsa::coordinator
