#include "replication/metadata_records.h"

#include <random>

#include "base/bytes.h"

namespace samsa::replication {
namespace {

enum Type : std::int16_t {
  kTopic = 2,
  kPartition = 3,
  kConfig = 4,
  kRemoveTopic = 9,
  kProducerIds = 15,
};

class Out {
 public:
  void i8(std::int8_t v) { b_.push_back(std::byte(v)); }
  template <class T>
  void be(T v) {
    std::byte tmp[sizeof(T)];
    store_be<T>(tmp, v);
    b_.insert(b_.end(), tmp, tmp + sizeof(T));
  }
  void str(const std::string& s) {
    be<std::int16_t>(static_cast<std::int16_t>(s.size()));
    auto p = reinterpret_cast<const std::byte*>(s.data());
    b_.insert(b_.end(), p, p + s.size());
  }
  void nstr(const std::optional<std::string>& s) {
    if (!s) {
      be<std::int16_t>(-1);
    } else {
      str(*s);
    }
  }
  void uuid(const Uuid& u) {
    for (auto x : u)
      b_.push_back(std::byte(x));
  }
  void ints(const std::vector<std::int32_t>& v) {
    be<std::int32_t>(static_cast<std::int32_t>(v.size()));
    for (auto x : v)
      be<std::int32_t>(x);
  }
  std::vector<std::byte> take() { return std::move(b_); }

 private:
  std::vector<std::byte> b_;
};

class In {
 public:
  explicit In(std::span<const std::byte> b) : b_(b) {}
  bool ok() const { return ok_; }
  bool done() const { return pos_ == b_.size(); }
  template <class T>
  T be() {
    if (!need(sizeof(T))) return T{};
    T v = load_be<T>(b_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::optional<std::string> nstr() {
    auto n = be<std::int16_t>();
    if (n == -1) return std::nullopt;
    if (n < 0 || !need(static_cast<std::size_t>(n))) {
      ok_ = false;
      return std::string();
    }
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  std::string str() {
    auto s = nstr();
    if (!s) ok_ = false;
    return s.value_or(std::string());
  }
  Uuid uuid() {
    Uuid u{};
    if (!need(16)) return u;
    for (auto& x : u)
      x = static_cast<std::uint8_t>(b_[pos_++]);
    return u;
  }
  std::vector<std::int32_t> ints() {
    auto n = be<std::int32_t>();
    std::vector<std::int32_t> v;
    if (n < 0 || !need(static_cast<std::size_t>(n) * 4)) {
      ok_ = false;
      return v;
    }
    v.reserve(static_cast<std::size_t>(n));
    for (std::int32_t i = 0; i < n; ++i)
      v.push_back(be<std::int32_t>());
    return v;
  }

 private:
  bool need(std::size_t n) {
    if (b_.size() - pos_ < n) ok_ = false;
    return ok_;
  }
  std::span<const std::byte> b_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

}  // namespace

Uuid random_uuid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  Uuid u;
  for (;;) {
    std::uint64_t a = rng(), b = rng();
    for (int i = 0; i < 8; ++i) {
      u[i] = static_cast<std::uint8_t>(a >> (8 * i));
      u[8 + i] = static_cast<std::uint8_t>(b >> (8 * i));
    }
    u[6] = (u[6] & 0x0f) | 0x40;  // version 4
    u[8] = (u[8] & 0x3f) | 0x80;  // IETF variant
    // Kafka reserves the zero id and the "metadata topic" id (all zeros but the last byte 1),
    // and ids whose text starts with '-' confuse command-line tools.
    if (u != kZeroUuid && uuid_to_string(u)[0] != '-') return u;
  }
}

std::string uuid_to_string(const Uuid& u) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (auto byte : u) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kB64[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kB64[(acc << (6 - bits)) & 0x3f]);
  return out;
}

std::optional<Uuid> uuid_from_string(std::string_view s) {
  if (s.size() != 22) return std::nullopt;
  Uuid u{};
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t k = 0;
  for (char c : s) {
    const char* p = std::char_traits<char>::find(kB64, 64, c);
    if (!p) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (k < 16) u[k++] = static_cast<std::uint8_t>(acc >> bits);
    }
  }
  return u;
}

std::vector<std::byte> encode_record(const MetadataRecord& r) {
  Out o;
  o.i8(0);
  std::visit(
      [&](const auto& rec) {
        using R = std::decay_t<decltype(rec)>;
        if constexpr (std::is_same_v<R, TopicRecord>) {
          o.be<std::int16_t>(kTopic);
          o.be<std::int16_t>(0);
          o.str(rec.name);
          o.uuid(rec.topic_id);
        } else if constexpr (std::is_same_v<R, PartitionRecord>) {
          o.be<std::int16_t>(kPartition);
          o.be<std::int16_t>(0);
          o.uuid(rec.topic_id);
          o.be<std::int32_t>(rec.partition);
          o.ints(rec.replicas);
          o.ints(rec.isr);
          o.be<std::int32_t>(rec.leader);
          o.be<std::int32_t>(rec.leader_epoch);
          o.be<std::int32_t>(rec.partition_epoch);
        } else if constexpr (std::is_same_v<R, RemoveTopicRecord>) {
          o.be<std::int16_t>(kRemoveTopic);
          o.be<std::int16_t>(0);
          o.uuid(rec.topic_id);
        } else if constexpr (std::is_same_v<R, ConfigRecord>) {
          o.be<std::int16_t>(kConfig);
          o.be<std::int16_t>(0);
          o.i8(static_cast<std::int8_t>(rec.resource));
          o.str(rec.resource_name);
          o.str(rec.key);
          o.nstr(rec.value);
        } else if constexpr (std::is_same_v<R, ProducerIdsRecord>) {
          o.be<std::int16_t>(kProducerIds);
          o.be<std::int16_t>(0);
          o.be<std::int32_t>(rec.broker_id);
          o.be<std::int64_t>(rec.next_producer_id);
        }
      },
      r);
  return o.take();
}

std::optional<MetadataRecord> decode_record(std::span<const std::byte> value) {
  In in(value);
  if (in.be<std::int8_t>() != 0) return std::nullopt;
  auto type = in.be<std::int16_t>();
  auto version = in.be<std::int16_t>();
  if (!in.ok() || version != 0) return std::nullopt;
  MetadataRecord out;
  switch (type) {
    case kTopic: {
      TopicRecord r;
      r.name = in.str();
      r.topic_id = in.uuid();
      out = std::move(r);
      break;
    }
    case kPartition: {
      PartitionRecord r;
      r.topic_id = in.uuid();
      r.partition = in.be<std::int32_t>();
      r.replicas = in.ints();
      r.isr = in.ints();
      r.leader = in.be<std::int32_t>();
      r.leader_epoch = in.be<std::int32_t>();
      r.partition_epoch = in.be<std::int32_t>();
      out = std::move(r);
      break;
    }
    case kRemoveTopic: {
      RemoveTopicRecord r;
      r.topic_id = in.uuid();
      out = r;
      break;
    }
    case kConfig: {
      ConfigRecord r;
      r.resource = static_cast<ConfigResource>(in.be<std::int8_t>());
      r.resource_name = in.str();
      r.key = in.str();
      r.value = in.nstr();
      out = std::move(r);
      break;
    }
    case kProducerIds: {
      ProducerIdsRecord r;
      r.broker_id = in.be<std::int32_t>();
      r.next_producer_id = in.be<std::int64_t>();
      out = r;
      break;
    }
    default:
      return std::nullopt;
  }
  if (!in.ok() || !in.done()) return std::nullopt;
  return out;
}

}  // namespace samsa::replication
