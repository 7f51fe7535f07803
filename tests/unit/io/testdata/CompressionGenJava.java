// Writes the records sections Kafka's Java client compresses (kafka-clients' own
// MemoryRecordsBuilder, so the framing is the real one): reads records from argv[0] (int64
// timestamp, int32 key length, key, int32 value length, value; repeated) and writes
// compression_<codec>_java.bin into argv[1]. Driven by compression_gen_java.py.
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.TimestampType;

public class CompressionGenJava {
  record Rec(long ts, byte[] key, byte[] value) {}

  public static void main(String[] args) throws Exception {
    List<Rec> recs = new ArrayList<>();
    try (DataInputStream in = new DataInputStream(new FileInputStream(args[0]))) {
      while (true) {
        long ts;
        try {
          ts = in.readLong();
        } catch (EOFException e) {
          break;
        }
        byte[] k = new byte[in.readInt()];
        in.readFully(k);
        byte[] v = new byte[in.readInt()];
        in.readFully(v);
        recs.add(new Rec(ts, k, v));
      }
    }
    String[] names = {"plain", "gzip", "snappy", "lz4", "zstd"};
    Compression[] codecs = {Compression.NONE, Compression.gzip().build(),
        Compression.snappy().build(), Compression.lz4().build(), Compression.zstd().build()};
    for (int c = 0; c < names.length; ++c) {
      MemoryRecordsBuilder b = MemoryRecords.builder(ByteBuffer.allocate(1 << 20), codecs[c],
          TimestampType.CREATE_TIME, 0L);
      for (Rec r : recs) b.append(r.ts, r.key, r.value);
      ByteBuffer batch = b.build().buffer();
      byte[] section = new byte[batch.remaining() - 61];
      batch.position(61);
      batch.get(section);
      try (FileOutputStream out = new FileOutputStream(args[1] + "/compression_" + names[c] + "_java.bin")) {
        out.write(section);
      }
      System.out.println(names[c] + " " + section.length);
    }
  }
}
