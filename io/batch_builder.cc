#include "io/batch_builder.h"

#include <algorithm>
#include <cstring>

#include "base/bytes.h"
#include "io/record_batch.h"

namespace samsa::io {
namespace {

std::size_t bytes_size(const BatchBuilder::Bytes& b) {
  return b ? varint_size(static_cast<std::int64_t>(b->size())) + b->size() : varint_size(-1);
}

std::size_t put_bytes(std::byte* p, const BatchBuilder::Bytes& b) {
  if (!b) return write_varint64(p, -1);
  std::size_t n = write_varint64(p, static_cast<std::int64_t>(b->size()));
  if (!b->empty()) std::memcpy(p + n, b->data(), b->size());
  return n + b->size();
}

}  // namespace

BatchBuilder::BatchBuilder(std::span<std::byte> buffer, Options opts)
    : buf_(buffer), opts_(opts), pos_(batch::kHeaderSize) {
  if (opts_.base_timestamp) base_ts_ = *opts_.base_timestamp;
}

std::size_t BatchBuilder::max_record_size(std::size_t key_len, std::size_t value_len,
                                          std::span<const Header> headers) {
  // length(5) attributes(1) timestampDelta(10) offsetDelta(5) key(5+) value(5+) count(5)
  std::size_t n = 5 + 1 + 10 + 5 + 5 + key_len + 5 + value_len + 5;
  for (const Header& h : headers)
    n += 5 + h.key.size() + 5 + (h.value ? h.value->size() : 0);
  return n;
}

bool BatchBuilder::add(std::int64_t timestamp, Bytes key, Bytes value,
                       std::span<const Header> headers) {
  if (finished_) return false;
  std::int64_t base = count_ == 0 && !opts_.base_timestamp ? timestamp : base_ts_;
  std::int64_t ts_delta = timestamp - base;
  std::size_t body = 1 + varint_size(ts_delta) + varint_size(count_) + bytes_size(key) +
                     bytes_size(value) + varint_size(static_cast<std::int64_t>(headers.size()));
  for (const Header& h : headers) {
    body += bytes_size(Bytes(h.key)) + bytes_size(h.value);
  }
  std::size_t total = varint_size(static_cast<std::int64_t>(body)) + body;
  if (total > buf_.size() - pos_) return false;

  std::byte* p = buf_.data() + pos_;
  p += write_varint64(p, static_cast<std::int64_t>(body));
  *p++ = std::byte{0};  // record attributes: unused in v2
  p += write_varint64(p, ts_delta);
  p += write_varint64(p, count_);
  p += put_bytes(p, key);
  p += put_bytes(p, value);
  p += write_varint64(p, static_cast<std::int64_t>(headers.size()));
  for (const Header& h : headers) {
    p += put_bytes(p, Bytes(h.key));
    p += put_bytes(p, h.value);
  }
  pos_ += total;
  if (count_ == 0) {
    base_ts_ = base;
    max_ts_ = timestamp;
  } else {
    max_ts_ = std::max(max_ts_, timestamp);
  }
  ++count_;
  return true;
}

std::span<std::byte> BatchBuilder::finish() {
  finished_ = true;
  std::byte* h = buf_.data();
  std::int16_t attributes = 0;
  if (opts_.timestamp_type == TimestampType::log_append_time)
    attributes |= batch::kTimestampTypeBit;
  if (opts_.transactional) attributes |= batch::kTransactionalBit;
  if (opts_.control) attributes |= batch::kControlBit;
  store_be<std::int64_t>(h + batch::kBaseOffset, opts_.base_offset);
  store_be<std::int32_t>(h + batch::kLength, static_cast<std::int32_t>(pos_ - batch::kLogOverhead));
  store_be<std::int32_t>(h + batch::kPartitionLeaderEpoch, opts_.partition_leader_epoch);
  h[batch::kMagic] = std::byte{2};
  store_be<std::int16_t>(h + batch::kAttributes, attributes);
  store_be<std::int32_t>(h + batch::kLastOffsetDelta, count_ - 1);
  store_be<std::int64_t>(h + batch::kBaseTimestamp, base_ts_);
  store_be<std::int64_t>(h + batch::kMaxTimestamp, max_ts_);
  store_be<std::int64_t>(h + batch::kProducerId, opts_.producer_id);
  store_be<std::int16_t>(h + batch::kProducerEpoch, opts_.producer_epoch);
  store_be<std::int32_t>(h + batch::kBaseSequence, opts_.base_sequence);
  store_be<std::int32_t>(h + batch::kRecordCount, count_);
  auto out = buf_.first(pos_);
  batch::update_crc(out);
  return out;
}

std::vector<std::byte> build_batch(std::span<const SimpleRecord> records,
                                   BatchBuilder::Options opts) {
  auto opt_bytes = [](const std::optional<std::string>& s) -> BatchBuilder::Bytes {
    if (!s) return std::nullopt;
    return as_bytes(*s);
  };
  std::size_t cap = batch::kHeaderSize;
  std::vector<BatchBuilder::Header> hs;
  for (const SimpleRecord& r : records) {
    hs.clear();
    for (const auto& [k, v] : r.headers)
      hs.push_back({as_bytes(k), opt_bytes(v)});
    cap +=
        BatchBuilder::max_record_size(r.key ? r.key->size() : 0, r.value ? r.value->size() : 0, hs);
  }
  std::vector<std::byte> buf(cap);
  BatchBuilder b(buf, opts);
  for (const SimpleRecord& r : records) {
    hs.clear();
    for (const auto& [k, v] : r.headers)
      hs.push_back({as_bytes(k), opt_bytes(v)});
    b.add(r.timestamp, opt_bytes(r.key), opt_bytes(r.value), hs);
  }
  buf.resize(b.finish().size());
  return buf;
}

std::vector<std::byte> build_txn_marker(std::int64_t producer_id, std::int16_t producer_epoch,
                                        bool commit, std::int32_t coordinator_epoch,
                                        std::int64_t timestamp) {
  std::byte key[4], value[6];
  store_be<std::int16_t>(key, 0);
  store_be<std::int16_t>(key + 2, commit ? 1 : 0);
  store_be<std::int16_t>(value, 0);
  store_be<std::int32_t>(value + 2, coordinator_epoch);
  BatchBuilder::Options o;
  o.producer_id = producer_id;
  o.producer_epoch = producer_epoch;
  o.transactional = true;
  o.control = true;
  std::vector<std::byte> buf(batch::kHeaderSize + BatchBuilder::max_record_size(4, 6));
  BatchBuilder b(buf, o);
  b.add(timestamp, std::span<const std::byte>(key), std::span<const std::byte>(value));
  buf.resize(b.finish().size());
  return buf;
}

}  // namespace samsa::io
