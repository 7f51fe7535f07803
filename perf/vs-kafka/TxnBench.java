// Transactional produce throughput (perf/vs-kafka/txn compiles and runs it): one producer with a transactional.id
// writes transactions of --per-txn records of --size bytes, round-robin over --partitions, for
// --seconds after --warmup-seconds, and prints one JSON line: records/s, transactions/s and the
// median and 99th percentile time of commitTransaction (ms).
//
//   java -cp "$(perf/vs-kafka/kafka.sh classpath)" perf/vs-kafka/TxnBench.java \
//        --bootstrap H:P --topic T --per-txn N [--size 100] [--partitions 6] [--seconds 15]

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxnBench {
  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
    int perTxn = Integer.parseInt(a.get("per-txn"));
    int size = Integer.parseInt(a.getOrDefault("size", "100"));
    int partitions = Integer.parseInt(a.getOrDefault("partitions", "6"));
    double seconds = Double.parseDouble(a.getOrDefault("seconds", "15"));
    double warmup = Double.parseDouble(a.getOrDefault("warmup-seconds", "3"));
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
    p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "txn-bench-" + System.nanoTime());
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    p.put(ProducerConfig.BATCH_SIZE_CONFIG, "65536");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    byte[] value = new byte[size];
    List<Double> commits = new ArrayList<>();
    long records = 0, txns = 0;
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
      producer.initTransactions();
      long start = System.nanoTime();
      long measureFrom = start + (long) (warmup * 1e9);
      long end = measureFrom + (long) (seconds * 1e9);
      long measuredStart = -1;
      int part = 0;
      while (System.nanoTime() < end) {
        producer.beginTransaction();
        for (int i = 0; i < perTxn; ++i) {
          producer.send(new ProducerRecord<>(a.get("topic"), part, null, value));
          part = (part + 1) % partitions;
        }
        long c0 = System.nanoTime();
        producer.commitTransaction();
        long c1 = System.nanoTime();
        if (c0 >= measureFrom) {
          if (measuredStart < 0) measuredStart = c0;
          records += perTxn;
          ++txns;
          commits.add((c1 - c0) / 1e6);
        }
      }
      double elapsed = (System.nanoTime() - (measuredStart < 0 ? measureFrom : measuredStart)) / 1e9;
      Collections.sort(commits);
      double p50 = commits.isEmpty() ? -1 : commits.get(commits.size() / 2);
      double p99 = commits.isEmpty() ? -1 : commits.get((int) Math.min(commits.size() - 1,
          Math.floor(commits.size() * 0.99)));
      System.out.printf("{\"records_per_s\": %.1f, \"txns_per_s\": %.2f, \"commit_p50_ms\": %.2f, "
          + "\"commit_p99_ms\": %.2f, \"txns\": %d}%n", records / elapsed, txns / elapsed, p50, p99,
          txns);
    }
  }
}
