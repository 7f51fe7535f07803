// The Java producer of the cluster fault test (tests/cluster/fault_test.py), on Apache Kafka's
// client jars (perf/vs-kafka/kafka.sh classpath): idempotent, acks=all (the client's defaults,
// said explicitly), paced at --rate records per second until --stop-file exists, then flushed.
// Record i goes to partition i % partitions with the value
// "<tag>.<instance>|<partition>|<sequence>|<padding>", sequences counting per partition from 0
// for each producer instance; the lines it appends to --out are those of
// tests/cluster/fault_clients.py's librdkafka producer, so one checker reads both:
//   A <tag>.<instance> <partition> <offset> <sequence> <unix ms>    acknowledged
//   F <tag>.<instance> <partition> <sequence> <exception class>     failed
//   X <tag>.<instance> <why>                                        instance ended (fatal)
//   S <tag> sent=<n>                                                records sent so far
//   D <tag>.<instance> sent=<n> unfinished=0                        done
// A producer whose send() throws (a fatal state, e.g. after the broker lost its sequence state)
// is closed and a new instance (a new producer id) goes on.
//
//   java -cp "$(perf/vs-kafka/kafka.sh classpath)" tests/clients/java/FaultProducer.java \
//        --bootstrap H:P --topic T --partitions N --out FILE --stop-file F [--rate 200]
//        [--tag java] [--delivery-timeout-ms 60000]

import java.io.BufferedWriter;
import java.io.FileWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class FaultProducer {
  static BufferedWriter out;
  static volatile long sent;

  static synchronized void line(String s) {
    try {
      out.write(s);
      out.write('\n');
    } catch (IOException e) {
      throw new RuntimeException(e);
    }
  }

  static synchronized void flushOut() throws IOException {
    out.flush();
  }

  static KafkaProducer<byte[], byte[]> make(String bootstrap, int deliveryTimeoutMs) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    // An isolated leader's connection is not reset: only the request timeout sends the
    // producer elsewhere (it bounds isolation failovers).
    props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG,
        Integer.toString(Math.min(5000, deliveryTimeoutMs / 2)));
    props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, Integer.toString(deliveryTimeoutMs));
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "5000");
    return new KafkaProducer<>(props);
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
    String bootstrap = a.get("bootstrap"), topic = a.get("topic"), outPath = a.get("out");
    String stopFile = a.get("stop-file");
    if (bootstrap == null || topic == null || outPath == null || stopFile == null) {
      System.err.println("usage: FaultProducer --bootstrap H:P --topic T --out F --stop-file S");
      System.exit(2);
    }
    int partitions = Integer.parseInt(a.getOrDefault("partitions", "6"));
    String tagBase = a.getOrDefault("tag", "java");
    double rate = Double.parseDouble(a.getOrDefault("rate", "200"));
    int deliveryTimeoutMs = Integer.parseInt(a.getOrDefault("delivery-timeout-ms", "60000"));
    String padding = "x".repeat(40);
    out = new BufferedWriter(new FileWriter(outPath, StandardCharsets.US_ASCII, true), 1 << 16);
    Thread flusher = new Thread(() -> { // the test reads the file while the run goes on
      try {
        while (!Thread.currentThread().isInterrupted()) {
          Thread.sleep(100);
          line("S " + tagBase + " sent=" + sent);
          flushOut();
        }
      } catch (InterruptedException | IOException e) {
        // stopping
      }
    }, "out-flusher");
    flusher.setDaemon(true);
    flusher.start();

    int instance = 0;
    int[] seqs = new int[partitions];
    KafkaProducer<byte[], byte[]> producer = make(bootstrap, deliveryTimeoutMs);
    long start = System.nanoTime();
    long i = 0;
    while (!Files.exists(Path.of(stopFile))) {
      long aheadNs = (long) (i / rate * 1e9) - (System.nanoTime() - start);
      if (aheadNs < -1_000_000_000L) { // blocked a while: no burst to make up for it
        start -= aheadNs + 1_000_000_000L; // now 1 s behind, no more
      } else if (aheadNs > 0) {
        TimeUnit.NANOSECONDS.sleep(Math.min(aheadNs, 50_000_000L));
        continue;
      }
      final int p = (int) (i % partitions), seq = seqs[p];
      final String tag = tagBase + "." + instance;
      byte[] value = (tag + "|" + p + "|" + seq + "|" + padding).getBytes(StandardCharsets.US_ASCII);
      try {
        producer.send(new ProducerRecord<>(topic, p, null, value), (md, err) -> {
          if (err != null) {
            line("F " + tag + " " + p + " " + seq + " " + err.getClass().getSimpleName());
          } else {
            line("A " + tag + " " + md.partition() + " " + md.offset() + " " + seq + " "
                + System.currentTimeMillis());
          }
        });
      } catch (org.apache.kafka.common.errors.TimeoutException e) {
        continue; // metadata not available within max.block.ms: the cluster is down; retry
      } catch (org.apache.kafka.common.KafkaException | IllegalStateException e) {
        line("X " + tag + " " + e.getClass().getSimpleName());
        producer.close(Duration.ofMillis(deliveryTimeoutMs));
        instance++;
        seqs = new int[partitions];
        producer = make(bootstrap, deliveryTimeoutMs);
        continue;
      }
      seqs[p]++;
      sent = ++i;
    }
    producer.flush();
    producer.close(Duration.ofMillis(deliveryTimeoutMs));
    line("D " + tagBase + "." + instance + " sent=" + i + " unfinished=0");
    flusher.interrupt();
    flusher.join();
    flushOut();
    out.close();
    System.exit(0);
  }
}
