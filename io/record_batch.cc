#include "io/record_batch.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "io/compression.h"

namespace samsa::io::batch {
namespace {

std::unexpected<Error> fail(Errc c, std::string detail) {
  return std::unexpected(Error{c, std::move(detail)});
}

std::string fmt(const char* f, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// Varint readers over a span with a cursor; false when truncated or overlong.
bool take_varint32(std::span<const std::byte> d, std::size_t& pos, std::int32_t& out) {
  std::size_t n = read_varint32(d.data() + pos, d.size() - pos, out);
  if (!n) return false;
  pos += n;
  return true;
}

bool take_varint64(std::span<const std::byte> d, std::size_t& pos, std::int64_t& out) {
  std::size_t n = read_varint64(d.data() + pos, d.size() - pos, out);
  if (!n) return false;
  pos += n;
  return true;
}

// A length-prefixed byte string: -1 is null, other negatives are malformed.
bool take_bytes(std::span<const std::byte> d, std::size_t& pos,
                std::optional<std::span<const std::byte>>& out) {
  std::int32_t len;
  if (!take_varint32(d, pos, len)) return false;
  if (len == -1) {
    out.reset();
    return true;
  }
  if (len < 0 || static_cast<std::size_t>(len) > d.size() - pos) return false;
  out = d.subspan(pos, static_cast<std::size_t>(len));
  pos += static_cast<std::size_t>(len);
  return true;
}

}  // namespace

BatchInfo parse_header(const std::byte* p) {
  BatchInfo i;
  i.base_offset = load_be<std::int64_t>(p + kBaseOffset);
  i.length = static_cast<std::int32_t>(kLogOverhead) + load_be<std::int32_t>(p + kLength);
  i.partition_leader_epoch = load_be<std::int32_t>(p + kPartitionLeaderEpoch);
  i.attributes = load_be<std::int16_t>(p + kAttributes);
  i.last_offset_delta = load_be<std::int32_t>(p + kLastOffsetDelta);
  i.base_timestamp = load_be<std::int64_t>(p + kBaseTimestamp);
  i.max_timestamp = load_be<std::int64_t>(p + kMaxTimestamp);
  i.producer_id = load_be<std::int64_t>(p + kProducerId);
  i.producer_epoch = load_be<std::int16_t>(p + kProducerEpoch);
  i.base_sequence = load_be<std::int32_t>(p + kBaseSequence);
  i.record_count = load_be<std::int32_t>(p + kRecordCount);
  i.crc = load_be<std::uint32_t>(p + kCrc);
  return i;
}

Result<BatchInfo> check_header(std::span<const std::byte> h, std::uint32_t max_batch_bytes,
                               Form form) {
  if (h.size() < kHeaderSize) {
    return fail(Errc::invalid_length,
                fmt("batch is %zu bytes, shorter than the %zu-byte RecordBatch v2 header", h.size(),
                    kHeaderSize));
  }
  auto magic = static_cast<std::int8_t>(h[kMagic]);
  if (magic != 2) {
    return fail(Errc::invalid_magic,
                fmt("magic is %d (byte 16), only 2 (RecordBatch v2) is supported", magic));
  }
  std::int32_t raw_len = load_be<std::int32_t>(h.data() + kLength);
  if (raw_len < static_cast<std::int32_t>(kHeaderSize - kLogOverhead)) {
    return fail(Errc::invalid_length, fmt("batchLength is %d, less than the %zu bytes of a header",
                                          raw_len, kHeaderSize - kLogOverhead));
  }
  BatchInfo info = parse_header(h.data());
  if (max_batch_bytes && static_cast<std::uint64_t>(raw_len) + kLogOverhead > max_batch_bytes) {
    return fail(Errc::batch_too_large,
                fmt("batch is %" PRId64 " bytes, over max.message.bytes %u",
                    static_cast<std::int64_t>(raw_len) + 12, max_batch_bytes));
  }
  if (info.last_offset_delta < 0) {
    return fail(Errc::invalid_record_count,
                fmt("lastOffsetDelta is %d, must not be negative", info.last_offset_delta));
  }
  if (form == Form::stored) {
    if (info.record_count < 0 || info.record_count > info.last_offset_delta + 1LL) {
      return fail(Errc::invalid_record_count,
                  fmt("recordCount is %d but lastOffsetDelta is %d (at most lastOffsetDelta + 1)",
                      info.record_count, info.last_offset_delta));
    }
    return info;
  }
  if (info.record_count < 1) {
    return fail(Errc::invalid_record_count,
                fmt("recordCount is %d, a batch needs at least one record", info.record_count));
  }
  if (static_cast<std::int64_t>(info.record_count) != info.last_offset_delta + 1LL) {
    return fail(Errc::invalid_record_count,
                fmt("recordCount is %d but lastOffsetDelta is %d (expected recordCount - 1)",
                    info.record_count, info.last_offset_delta));
  }
  return info;
}

std::optional<std::string> check_single_batch(std::span<const std::byte> records) {
  if (records.empty()) return "no record batch";
  if (records.size() < kLogOverhead) return "no complete record batch";
  const std::int32_t len = load_be<std::int32_t>(records.data() + kLength);
  if (len >= 0 && kLogOverhead + static_cast<std::uint64_t>(len) < records.size())
    return "exactly one record batch per partition is allowed";
  // Kafka's batch iterator stops at a batch the bytes do not hold whole: no batch at all.
  if (len >= 0 && kLogOverhead + static_cast<std::uint64_t>(len) > records.size())
    return "no complete record batch";
  return std::nullopt;
}

std::uint32_t compute_crc(std::span<const std::byte> b) {
  return crc32c(0, b.data() + kAttributes, b.size() - kAttributes);
}

void update_crc(std::span<std::byte> b) {
  store_be<std::uint32_t>(b.data() + kCrc, compute_crc(b));
}

Result<BatchInfo> validate(std::span<const std::byte> b, std::uint32_t max_batch_bytes,
                           RecordTimestamps* ts, Form form) {
  auto hdr = check_header(b, max_batch_bytes, form);
  if (!hdr) return hdr;
  const BatchInfo& info = *hdr;
  if (static_cast<std::size_t>(info.length) != b.size()) {
    return fail(Errc::invalid_length,
                fmt("batchLength %d says the batch is %d bytes, but %zu bytes were given",
                    info.length - 12, info.length, b.size()));
  }
  std::uint32_t stored = load_be<std::uint32_t>(b.data() + kCrc);
  std::uint32_t computed = compute_crc(b);
  if (stored != computed) {
    return fail(Errc::corrupt_batch,
                fmt("CRC32C mismatch: batch says 0x%08x, bytes 21..%zu give 0x%08x", stored,
                    b.size(), computed));
  }
  std::size_t records_bytes = b.size() - kHeaderSize;
  if (info.compression() == 0) {
    if (static_cast<std::uint64_t>(info.record_count) * kMinRecordSize > records_bytes) {
      return fail(Errc::invalid_record_count,
                  fmt("recordCount %d cannot fit in %zu bytes of records", info.record_count,
                      records_bytes));
    }
    RecordReader rr(b.subspan(kHeaderSize), info.record_count);
    RecordTimestamps found;
    std::int32_t expect_delta = 0, index = 0;
    for (;;) {
      auto r = rr.next();
      if (!r) return std::unexpected(std::move(r.error()));
      if (!*r) break;
      const std::int32_t d = (*r)->offset_delta;
      const bool ok = form == Form::produced ? d == expect_delta
                                             : d >= expect_delta && d <= info.last_offset_delta;
      if (!ok) {
        return fail(Errc::corrupt_batch,
                    fmt("record %d has offsetDelta %d, expected %s%d", index, d,
                        form == Form::produced ? "" : "at least ", expect_delta));
      }
      expect_delta = d + 1;
      ++index;
      const std::int64_t t = info.base_timestamp + (*r)->timestamp_delta;
      if (t > found.max) found.max = t;
      if (t != -1) {
        found.min_set = std::min(found.min_set, t);
        found.max_set = std::max(found.max_set, t);
      }
    }
    if (rr.remaining() != 0) {
      return fail(Errc::corrupt_batch, fmt("%zu bytes left after the last of %d records",
                                           rr.remaining(), info.record_count));
    }
    if (ts) *ts = found;
  } else if (info.compression() > 4) {
    return fail(Errc::corrupt_batch,
                fmt("compression codec %d (attributes bits 0-2) is unknown", info.compression()));
  } else if (ts) {
    ts->max = info.max_timestamp;
    for (std::int64_t t : {info.base_timestamp, info.max_timestamp}) {
      if (t == -1) continue;
      ts->min_set = std::min(ts->min_set, t);
      ts->max_set = std::max(ts->max_set, t);
    }
  }
  return info;
}

Result<std::optional<Record>> RecordReader::next() {
  if (left_ <= 0) return std::optional<Record>{};
  std::size_t start = pos_;
  auto bad = [&](const char* what) {
    return fail(Errc::corrupt_batch,
                fmt("record at byte %zu of the records section: %s", start, what));
  };
  std::int64_t len;
  if (!take_varint64(data_, pos_, len)) return bad("truncated length");
  if (len < 0 || static_cast<std::uint64_t>(len) > data_.size() - pos_) {
    return bad("length runs past the end of the batch");
  }
  auto body = data_.subspan(pos_, static_cast<std::size_t>(len));
  std::size_t p = 0;
  Record r;
  if (body.empty()) return bad("empty record");
  r.attributes = static_cast<std::int8_t>(body[p++]);
  if (!take_varint64(body, p, r.timestamp_delta)) return bad("truncated timestampDelta");
  if (!take_varint32(body, p, r.offset_delta)) return bad("truncated offsetDelta");
  if (!take_bytes(body, p, r.key)) return bad("bad key length");
  if (!take_bytes(body, p, r.value)) return bad("bad value length");
  if (!take_varint32(body, p, r.header_count) || r.header_count < 0) {
    return bad("bad header count");
  }
  r.headers = body.subspan(p);
  // Walk the headers once so a record that claims more than it holds is caught here.
  HeaderReader hr(r.headers, r.header_count);
  for (;;) {
    auto h = hr.next();
    if (!h) return bad("malformed header");
    if (!*h) break;
  }
  if (hr.remaining() != 0) return bad("bytes left over after the headers");
  pos_ += static_cast<std::size_t>(len);
  --left_;
  return std::optional<Record>(r);
}

Result<std::optional<Header>> HeaderReader::next() {
  if (left_ <= 0) return std::optional<Header>{};
  std::optional<std::span<const std::byte>> key;
  Header h;
  if (!take_bytes(data_, pos_, key) || !key) {
    return fail(Errc::corrupt_batch, fmt("header at byte %zu: bad key", pos_));
  }
  h.key = *key;
  if (!take_bytes(data_, pos_, h.value)) {
    return fail(Errc::corrupt_batch, fmt("header at byte %zu: bad value", pos_));
  }
  --left_;
  return std::optional<Header>(h);
}

Result<std::span<const std::byte>> records_of(std::span<const std::byte> b,
                                              std::vector<std::byte>& storage,
                                              std::size_t max_out) {
  if (b.size() < kHeaderSize) {
    return fail(Errc::invalid_length, fmt("batch of %zu bytes has no records", b.size()));
  }
  BatchInfo info = parse_header(b.data());
  auto payload = b.subspan(kHeaderSize);
  if (info.compression() == 0) return payload;
#if SAMSA_HAVE_COMPRESSION
  auto out = decompress(static_cast<Codec>(info.compression()), payload, max_out);
  if (!out) {
    return fail(Errc::corrupt_batch, "decompressing the records failed: " + out.error());
  }
  storage = std::move(*out);
  return std::span<const std::byte>(storage);
#else
  (void)storage;
  (void)max_out;
  return fail(Errc::corrupt_batch,
              fmt("codec %d: this build has no compression support", info.compression()));
#endif
}

Result<TxnMarker> parse_txn_marker(std::span<const std::byte> b) {
  std::vector<std::byte> storage;
  auto recs = records_of(b, storage, 4096);
  if (!recs) return std::unexpected(recs.error());
  const BatchInfo info = parse_header(b.data());
  RecordReader rr(*recs, info.record_count);
  auto rec = rr.next();
  if (!rec) return std::unexpected(rec.error());
  if (!*rec || !(*rec)->key || (*rec)->key->size() < 4) {
    return fail(Errc::invalid_record, "control batch without a marker key");
  }
  const auto key = *(*rec)->key;
  const auto type = load_be<std::int16_t>(key.data() + 2);
  if (type != 0 && type != 1) {
    return fail(Errc::invalid_record, fmt("control record type %d is not a marker", type));
  }
  TxnMarker m{static_cast<ControlType>(type), -1};
  if ((*rec)->value && (*rec)->value->size() >= 6)
    m.coordinator_epoch = load_be<std::int32_t>((*rec)->value->data() + 2);
  return m;
}

}  // namespace samsa::io::batch
