// The four compression codecs of Kafka's RecordBatch (attributes bits 0-2), with the framings
// Kafka clients actually write: gzip streams, snappy in xerial's framing (Java, kafka-python) or a
// raw block (librdkafka), LZ4 frames, zstd frames. The broker stores batches compressed as sent; it
// decompresses only to look inside (timestamp lookups, validation tools, tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <vector>

namespace samsa::io {

enum class Codec : std::uint8_t { none = 0, gzip = 1, snappy = 2, lz4 = 3, zstd = 4 };

const char* codec_name(Codec c);

// Decompresses a whole payload (a batch's records section). Fails, with a message naming the
// codec and saying why, on corrupt input or when the output would exceed max_out bytes
// (decompression bombs). Callable from any thread: decoder state is kept per thread.
std::expected<std::vector<std::byte>, std::string> decompress(Codec c,
                                                              std::span<const std::byte> in,
                                                              std::size_t max_out);

// Compresses in the framing Kafka's Java client writes (what other brokers and clients read).
std::expected<std::vector<std::byte>, std::string> compress(Codec c, std::span<const std::byte> in);

}  // namespace samsa::io
