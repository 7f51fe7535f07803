// The Java producer of the "exactly once through faults" test (tests/integration/eos_test.py),
// on Apache Kafka's client jars (perf/vs-kafka/kafka.sh classpath). It keeps the client's
// defaults (idempotence on, acks=all, retries unlimited within delivery.timeout.ms, five
// requests in flight); only the timeouts are set, so that a run is bounded. Record i goes to
// partition i % partitions and carries the value "<tag>|<partition>|<sequence>|<padding>",
// sequence counting per partition from 0, so the checker can tell duplicates, losses and
// reorders apart.
//
// Every acknowledged record is appended to --acks as "partition offset sequence"; a failed one is
// printed to stderr as "FAILED partition sequence error". --rate paces the sends (records per
// second, 0 = unpaced) so that the test's faults land throughout the run; the harness bounds the
// run time. The last stdout line is a JSON summary; exit 0 when every record was acknowledged.
//
//   java -cp "$(perf/vs-kafka/kafka.sh classpath)" tests/clients/java/EosProducer.java \
//        --bootstrap H:P --topic T --acks FILE [--records N] [--partitions 6] [--tag java]
//        [--rate R] [--pad 40] [--delivery-timeout-ms 60000]

import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class EosProducer {
  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) {
      a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
    }
    String bootstrap = a.get("bootstrap"), topic = a.get("topic"), acksPath = a.get("acks");
    if (bootstrap == null || topic == null || acksPath == null) {
      System.err.println("usage: EosProducer --bootstrap H:P --topic T --acks FILE [...]");
      System.exit(2);
    }
    int records = Integer.parseInt(a.getOrDefault("records", "200000"));
    int partitions = Integer.parseInt(a.getOrDefault("partitions", "6"));
    String tag = a.getOrDefault("tag", "java");
    double rate = Double.parseDouble(a.getOrDefault("rate", "0"));
    String padding = "x".repeat(Integer.parseInt(a.getOrDefault("pad", "40")));
    int deliveryTimeoutMs = Integer.parseInt(a.getOrDefault("delivery-timeout-ms", "60000"));

    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    // Timeouts only: delivery.timeout.ms must be >= linger.ms + request.timeout.ms.
    props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG,
        Integer.toString(Math.min(10000, deliveryTimeoutMs / 2)));
    props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, Integer.toString(deliveryTimeoutMs));
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Integer.toString(deliveryTimeoutMs));

    BufferedWriter out =
        new BufferedWriter(new FileWriter(acksPath, StandardCharsets.US_ASCII), 1 << 16);
    AtomicLong acked = new AtomicLong(), failed = new AtomicLong();
    Object lock = new Object(); // callbacks run on the sender thread; the flusher below is another
    Thread flusher = new Thread(() -> { // the harness watches the file to pace its faults
      try {
        while (!Thread.currentThread().isInterrupted()) {
          Thread.sleep(100);
          synchronized (lock) {
            out.flush();
          }
        }
      } catch (InterruptedException | IOException e) {
        // stopping
      }
    }, "acks-flusher");
    flusher.setDaemon(true);
    flusher.start();

    long start = System.nanoTime();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
      for (int i = 0; i < records; i++) {
        if (rate > 0 && i % 64 == 0) {
          long aheadNs = (long) (i / rate * 1e9) - (System.nanoTime() - start);
          if (aheadNs > 0) TimeUnit.NANOSECONDS.sleep(aheadNs);
        }
        final int p = i % partitions, seq = i / partitions;
        byte[] value =
            (tag + "|" + p + "|" + seq + "|" + padding).getBytes(StandardCharsets.US_ASCII);
        producer.send(new ProducerRecord<>(topic, p, null, value), (md, err) -> {
          if (err != null) {
            failed.incrementAndGet();
            System.err.println("FAILED " + p + " " + seq + " " + err);
            return;
          }
          acked.incrementAndGet();
          synchronized (lock) {
            try {
              out.write(md.partition() + " " + md.offset() + " " + seq + "\n");
            } catch (IOException e) {
              throw new RuntimeException(e);
            }
          }
        });
      }
      producer.flush();
    }
    flusher.interrupt();
    flusher.join();
    synchronized (lock) {
      out.close();
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    System.out.printf(
        "{\"client\":\"java\",\"records\":%d,\"acked\":%d,\"failed\":%d,\"seconds\":%.2f}%n",
        records, acked.get(), failed.get(), seconds);
    System.out.flush();
    System.exit(acked.get() == records ? 0 : 1);
  }
}
