// RecordBatch v2: the builder, the record reader and validation, checked against batches that a
// real client library (kafka-python, run as a separate process) writes.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "io/batch_builder.h"
#include "io/record_batch.h"
#include "tests/support/io_testing.h"

namespace samsa::io {
namespace {

std::string str(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::vector<std::byte> from_hex(const std::string& h) {
  std::vector<std::byte> out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<std::byte>(std::stoi(h.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Runs /usr/bin/python3 with the script and returns its stdout lines.
std::vector<std::string> run_python(const std::string& script) {
  testing::TempDir d;
  auto path = d / "gen.py";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(script.c_str(), f);
  std::fclose(f);
  std::string cmd = "/usr/bin/python3 " + path.string();
  FILE* p = ::popen(cmd.c_str(), "r");
  std::vector<std::string> lines;
  if (!p) return lines;
  char buf[1 << 16];
  while (std::fgets(buf, sizeof buf, p)) {
    std::string l(buf);
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r'))
      l.pop_back();
    lines.push_back(l);
  }
  EXPECT_EQ(::pclose(p), 0) << "python failed";
  return lines;
}

TEST(BatchBuilder, RoundTripsRecordsKeysValuesHeaders) {
  std::vector<std::byte> buf(4096);
  BatchBuilder::Options o;
  o.producer_id = 77;
  o.producer_epoch = 3;
  o.base_sequence = 10;
  BatchBuilder b(buf, o);
  BatchBuilder::Header hs[] = {{as_bytes("trace"), as_bytes("abc")},
                               {as_bytes("nullval"), std::nullopt}};
  ASSERT_TRUE(b.add(1000, as_bytes("k0"), as_bytes("value0"), hs));
  ASSERT_TRUE(b.add(990, std::nullopt, as_bytes("v1")));  // earlier timestamp
  ASSERT_TRUE(b.add(1010, as_bytes(""), std::nullopt));   // empty key, null value
  auto batch = b.finish();

  auto info = Log::validate_batch(batch, 1 << 20);
  ASSERT_TRUE(info.has_value()) << info.error().detail;
  EXPECT_EQ(info->record_count, 3);
  EXPECT_EQ(info->last_offset_delta, 2);
  EXPECT_EQ(info->base_timestamp, 1000);
  EXPECT_EQ(info->max_timestamp, 1010);
  EXPECT_EQ(info->producer_id, 77);
  EXPECT_EQ(info->producer_epoch, 3);
  EXPECT_EQ(info->base_sequence, 10);
  EXPECT_EQ(info->length, static_cast<std::int32_t>(batch.size()));

  std::vector<std::byte> storage;
  auto recs = batch::records_of(batch, storage);
  ASSERT_TRUE(recs.has_value());
  batch::RecordReader rr(*recs, info->record_count);
  auto r0 = rr.next();
  ASSERT_TRUE(r0 && *r0);
  EXPECT_EQ((*r0)->offset_delta, 0);
  EXPECT_EQ((*r0)->timestamp_delta, 0);
  EXPECT_EQ(str(*(*r0)->key), "k0");
  EXPECT_EQ(str(*(*r0)->value), "value0");
  ASSERT_EQ((*r0)->header_count, 2);
  batch::HeaderReader hr((*r0)->headers, (*r0)->header_count);
  auto h0 = hr.next();
  ASSERT_TRUE(h0 && *h0);
  EXPECT_EQ(str((*h0)->key), "trace");
  EXPECT_EQ(str(*(*h0)->value), "abc");
  auto h1 = hr.next();
  ASSERT_TRUE(h1 && *h1);
  EXPECT_EQ(str((*h1)->key), "nullval");
  EXPECT_FALSE((*h1)->value.has_value());
  auto r1 = rr.next();
  ASSERT_TRUE(r1 && *r1);
  EXPECT_EQ((*r1)->timestamp_delta, -10);
  EXPECT_FALSE((*r1)->key.has_value());
  auto r2 = rr.next();
  ASSERT_TRUE(r2 && *r2);
  EXPECT_TRUE((*r2)->key.has_value());
  EXPECT_TRUE((*r2)->key->empty());
  EXPECT_FALSE((*r2)->value.has_value());
  auto end = rr.next();
  ASSERT_TRUE(end.has_value());
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ(rr.remaining(), 0u);
}

TEST(BatchBuilder, RefusesRecordsThatDoNotFit) {
  std::vector<std::byte> buf(150);  // header 61 + one record of ~58 bytes, not two
  BatchBuilder b(buf);
  std::string big(50, 'x');
  EXPECT_TRUE(b.add(1, std::nullopt, as_bytes(big)));
  std::size_t before = b.size();
  EXPECT_FALSE(b.add(2, std::nullopt, as_bytes(big)));
  EXPECT_EQ(b.size(), before);
  EXPECT_EQ(b.count(), 1);
  EXPECT_TRUE(Log::validate_batch(b.finish(), 1 << 20).has_value());
}

TEST(BatchBuilder, MatchesKafkaPythonByteForByte) {
  // The same records through kafka-python's DefaultRecordBatchBuilder.
  auto lines = run_python(R"(
from kafka.record.default_records import DefaultRecordBatchBuilder
b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                              producer_epoch=-1, base_sequence=-1, batch_size=1<<20)
b.append(0, timestamp=1000, key=b"k", value=b"v", headers=[("h", b"x")])
b.append(1, timestamp=1005, key=None, value=b"v2", headers=[])
print(bytes(b.build()).hex())
)");
  ASSERT_EQ(lines.size(), 1u);
  auto theirs = from_hex(lines[0]);
  std::vector<std::byte> buf(1024);
  BatchBuilder b(buf);
  BatchBuilder::Header h[] = {{as_bytes("h"), as_bytes("x")}};
  b.add(1000, as_bytes("k"), as_bytes("v"), h);
  b.add(1005, std::nullopt, as_bytes("v2"));
  auto ours = b.finish();
  // kafka-python writes partitionLeaderEpoch 0 where we write -1 (the broker sets it).
  store_be<std::int32_t>(theirs.data() + batch::kPartitionLeaderEpoch, -1);
  ASSERT_EQ(ours.size(), theirs.size());
  EXPECT_TRUE(std::equal(ours.begin(), ours.end(), theirs.begin()));
}

TEST(RecordBatch, ValidatesClientBatchesOfEveryCodec) {
  auto lines = run_python(R"(
from kafka.record.default_records import DefaultRecordBatchBuilder
for codec in (0, 1, 2, 3, 4):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0,
                                  producer_id=5, producer_epoch=1, base_sequence=0,
                                  batch_size=1<<20)
    for i in range(20):
        b.append(i, timestamp=5000 + 10 * i, key=b"key%d" % i, value=b"v" * (50 + i), headers=[])
    print(codec, bytes(b.build()).hex())
)");
  ASSERT_EQ(lines.size(), 5u);
  for (const auto& l : lines) {
    int codec = l[0] - '0';
    auto bytes = from_hex(l.substr(2));
    auto info = Log::validate_batch(bytes, 1 << 20);
    ASSERT_TRUE(info.has_value()) << "codec " << codec << ": " << info.error().detail;
    EXPECT_EQ(info->compression(), codec);
    EXPECT_EQ(info->record_count, 20);
    EXPECT_EQ(info->max_timestamp, 5190);
#if SAMSA_HAVE_COMPRESSION
    std::vector<std::byte> storage;
    auto recs = batch::records_of(bytes, storage);
    ASSERT_TRUE(recs.has_value()) << "codec " << codec << ": " << recs.error().detail;
    batch::RecordReader rr(*recs, info->record_count);
    int n = 0;
    for (;;) {
      auto r = rr.next();
      ASSERT_TRUE(r.has_value()) << r.error().detail;
      if (!*r) break;
      EXPECT_EQ((*r)->offset_delta, n);
      EXPECT_EQ(info->base_timestamp + (*r)->timestamp_delta, 5000 + 10 * n);
      EXPECT_EQ(str(*(*r)->key), "key" + std::to_string(n));
      EXPECT_EQ((*r)->value->size(), 50u + n);
      ++n;
    }
    EXPECT_EQ(n, 20);
#endif
  }
}

// Each malformed batch is rejected with the code and a detail naming the field and values.
class BadBatch : public ::testing::Test {
 protected:
  std::vector<std::byte> good = testing::make_batch(3, 1000);
  void expect(const std::vector<std::byte>& b, Errc code, const std::string& needle) {
    auto r = Log::validate_batch(b, 1 << 20);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, code) << errc_name(r.error().code) << ": " << r.error().detail;
    EXPECT_NE(r.error().detail.find(needle), std::string::npos) << r.error().detail;
  }
};

TEST_F(BadBatch, WrongCrc) {
  auto b = good;
  b[b.size() - 1] ^= std::byte{1};
  expect(b, Errc::corrupt_batch, "CRC32C mismatch");
}

TEST_F(BadBatch, WrongMagic) {
  auto b = good;
  b[batch::kMagic] = std::byte{1};
  expect(b, Errc::invalid_magic, "magic is 1");
}

TEST_F(BadBatch, TruncatedBytes) {
  auto b = good;
  b.resize(b.size() - 5);
  expect(b, Errc::invalid_length, "batchLength");
  b.resize(40);
  expect(b, Errc::invalid_length, "shorter than the 61-byte");
}

TEST_F(BadBatch, LengthFieldTooSmall) {
  auto b = good;
  store_be<std::int32_t>(b.data() + batch::kLength, 10);
  expect(b, Errc::invalid_length, "batchLength is 10");
}

TEST_F(BadBatch, RecordCountDisagreesWithLastOffsetDelta) {
  auto b = good;
  store_be<std::int32_t>(b.data() + batch::kRecordCount, 4);
  batch::update_crc(b);
  expect(b, Errc::invalid_record_count, "recordCount is 4 but lastOffsetDelta is 2");
}

TEST_F(BadBatch, AbsurdRecordCount) {
  auto b = good;
  store_be<std::int32_t>(b.data() + batch::kRecordCount, 1000000);
  store_be<std::int32_t>(b.data() + batch::kLastOffsetDelta, 999999);
  batch::update_crc(b);
  expect(b, Errc::invalid_record_count, "recordCount 1000000 cannot fit");
  store_be<std::int32_t>(b.data() + batch::kRecordCount, -1);
  store_be<std::int32_t>(b.data() + batch::kLastOffsetDelta, -2);
  batch::update_crc(b);
  expect(b, Errc::invalid_record_count, "lastOffsetDelta is -2");
}

TEST_F(BadBatch, RecordFramingInsideAValidCrc) {
  // A record length that runs past the batch, with the CRC recomputed so only framing is wrong.
  auto b = good;
  b[batch::kHeaderSize] = std::byte{0x7e};  // varint 63: far longer than the record
  batch::update_crc(b);
  expect(b, Errc::corrupt_batch, "record at byte");
}

// Kafka does not refuse a batch whose maxTimestamp disagrees with its records: it rewrites it.
// validate() accepts it and reports the records' own timestamps.
TEST_F(BadBatch, MaxTimestampDisagreeingWithRecordsIsNotAnError) {
  auto b = good;
  store_be<std::int64_t>(b.data() + batch::kMaxTimestamp, 5);
  batch::update_crc(b);
  batch::RecordTimestamps ts;
  auto r = batch::validate(b, 0, &ts);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(r->max_timestamp, 5);
  EXPECT_EQ(ts.max, 1002);
  EXPECT_EQ(ts.min_set, 1000);
  EXPECT_EQ(ts.max_set, 1002);
}

// Records without a timestamp (-1, NO_TIMESTAMP: librdkafka sends it when the application
// passes -1) are valid; they take no part in the timestamp bounds.
TEST(BatchTimestamps, NoTimestampRecords) {
  std::vector<SimpleRecord> rs = {{-1, "a", "1", {}}, {-1, "b", "2", {}}};
  auto b = build_batch(rs);
  batch::RecordTimestamps ts;
  auto r = batch::validate(b, 0, &ts);
  ASSERT_TRUE(r.has_value()) << r.error().detail;
  EXPECT_EQ(ts.max, -1);
  EXPECT_EQ(ts.min_set, INT64_MAX);
  EXPECT_EQ(ts.max_set, INT64_MIN);
}

TEST_F(BadBatch, TooLarge) {
  auto r = Log::validate_batch(good, 64);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::batch_too_large);
  EXPECT_NE(r.error().detail.find("over max.message.bytes 64"), std::string::npos);
}

}  // namespace
}  // namespace samsa::io
