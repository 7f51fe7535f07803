// Drives a broker with Apache Kafka's Java client (kafka-clients from the jars that
// perf/vs-kafka/kafka.sh fetches): admin create, keyed produce with headers through every codec
// with acks=all (idempotent, the client's default), read-back by assignment, seek to an offset
// and to a timestamp, consumer groups with committed offsets, a check of the stored segments
// (tests/clients/segments.py), admin delete. Exits non-zero on any failure.
//
// Run as a single-file source program, no build step:
//   java -cp "$(perf/vs-kafka/kafka.sh classpath)" tests/clients/java/JavaDriver.java \
//        --bootstrap HOST:PORT --topic-prefix P --log-dir DIR [--timeout S] [--small]
//        [--codecs none,gzip,...] [--group-protocols classic,consumer]

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class JavaDriver {
  static final String NAME = "java";
  static final int PARTITIONS = 3;
  static final List<String> ALL_CODECS = List.of("none", "gzip", "snappy", "lz4", "zstd");
  static final long T0 = System.currentTimeMillis();

  static final class DriverError extends RuntimeException {
    DriverError(String m) {
      super(m);
    }
  }

  record Rec(int partition, byte[] key, byte[] value, List<Header> headers, long timestamp,
             String codec) {}

  static void check(boolean cond, String msg) {
    if (!cond) throw new DriverError(msg);
  }

  static void step(String msg) {
    System.out.printf("[%s %6.2fs] %s%n", NAME, (System.currentTimeMillis() - T0) / 1000.0, msg);
    System.out.flush();
  }

  // Same shapes as tests/clients/driverlib.py make_records: values start with "<codec>|" for the
  // segment check; the filler makes compression pay off.
  static final byte[] FILLER =
      "samsa-kafka-compatible-log-broker;".repeat(8).getBytes(StandardCharsets.US_ASCII);

  static byte[] concat(byte[]... parts) {
    int n = 0;
    for (byte[] p : parts) n += p.length;
    byte[] out = new byte[n];
    int pos = 0;
    for (byte[] p : parts) {
      System.arraycopy(p, 0, out, pos, p.length);
      pos += p.length;
    }
    return out;
  }

  static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  static List<Rec> makeRecords(String codec, String prefix, int count, long tBase, int start) {
    List<Rec> out = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      int g = start + i;
      byte[] filler = concat(FILLER, Arrays.copyOf(FILLER, (i * 37) % FILLER.length));
      byte[] key = i == 1 ? null
          : concat(ascii("key-" + codec + "-" + i), new byte[] {0, (byte) 255, (byte) (i % 256)});
      byte[] value = concat(ascii(String.format("%s|%s|%04d|", codec, prefix, i)), filler,
                            new byte[] {0, (byte) (128 + i % 128)});
      List<Header> headers = switch (i % 4) {
        case 0 -> List.of();
        case 1 -> List.of(new RecordHeader("h1", ascii("v1")),
                          new RecordHeader("bin", new byte[] {0, 1, (byte) 254, (byte) 255}));
        case 2 -> List.of(new RecordHeader("dup", ascii("a")), new RecordHeader("dup", ascii("b")),
                          new RecordHeader("empty", new byte[0]));
        default -> List.of(new RecordHeader("codec", ascii(codec)));
      };
      out.add(new Rec(i % PARTITIONS, key, value, headers, tBase + g * 10L, codec));
    }
    return out;
  }

  static void checkRecord(int p, long offset, Rec w, ConsumerRecord<byte[], byte[]> g,
                          String what) {
    String where = "partition " + p + " offset " + g.offset() + " (" + what + ", codec " + w.codec
        + ")";
    check(g.offset() == offset, where + ": expected offset " + offset);
    check(Arrays.equals(g.key(), w.key), where + ": key differs from the produced one");
    check(Arrays.equals(g.value(), w.value), where + ": value differs from the produced one");
    Header[] gh = g.headers().toArray();
    check(gh.length == w.headers.size(), where + ": " + gh.length + " headers, produced "
        + w.headers.size());
    for (int i = 0; i < gh.length; i++) {
      check(gh[i].key().equals(w.headers.get(i).key())
                && Arrays.equals(gh[i].value(), w.headers.get(i).value()),
            where + ": header " + i + " differs");
    }
    check(g.timestamp() == w.timestamp, where + ": timestamp " + g.timestamp() + " != produced "
        + w.timestamp);
  }

  static void comparePartition(int p, List<Rec> want, List<ConsumerRecord<byte[], byte[]>> got,
                               String what) {
    check(got.size() == want.size(), "partition " + p + ": " + what + " " + got.size()
        + " records, produced " + want.size());
    for (int i = 0; i < want.size(); i++) checkRecord(p, i, want.get(i), got.get(i), what + " #" + i);
  }

  static Map<Integer, List<ConsumerRecord<byte[], byte[]>>> consume(
      KafkaConsumer<byte[], byte[]> c, Map<Integer, Integer> want, long timeoutMs) {
    Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = new HashMap<>();
    for (int p : want.keySet()) got.put(p, new ArrayList<>());
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (want.entrySet().stream().anyMatch(e -> got.get(e.getKey()).size() < e.getValue())) {
      check(System.currentTimeMillis() < deadline, "consume timed out: have "
          + got.values().stream().map(List::size).collect(Collectors.toList()) + ", want " + want.values());
      for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
        List<ConsumerRecord<byte[], byte[]>> l = got.get(r.partition());
        if (l != null && l.size() < want.get(r.partition())) l.add(r);
      }
    }
    return got;
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new HashMap<>(Map.of("--timeout", "60", "--codecs",
        String.join(",", ALL_CODECS), "--group-protocols", "classic"));
    boolean small = false;
    for (int i = 0; i < argv.length; i++) {
      if (argv[i].equals("--small")) small = true;
      else if (argv[i].startsWith("--") && i + 1 < argv.length) a.put(argv[i], argv[++i]);
      else usage("unexpected argument " + argv[i]);
    }
    for (String k : List.of("--bootstrap", "--topic-prefix", "--log-dir"))
      if (!a.containsKey(k)) usage(k + " is required");
    long timeout = (long) (Double.parseDouble(a.get("--timeout")) * 1000);
    Thread watchdog = new Thread(() -> {
      try {
        Thread.sleep(timeout);
      } catch (InterruptedException e) {
        return;
      }
      System.err.println(NAME + ": FAIL: hard timeout of " + timeout / 1000 + "s reached");
      Runtime.getRuntime().halt(3);
    }, "driver-watchdog");
    watchdog.setDaemon(true);
    watchdog.start();
    try {
      run(a, small);
    } catch (DriverError e) {
      System.err.println(NAME + ": FAIL: " + e.getMessage());
      Runtime.getRuntime().halt(1);
    } catch (Throwable e) {
      e.printStackTrace();
      System.err.println(NAME + ": FAIL: unexpected exception");
      Runtime.getRuntime().halt(1);
    }
    step("PASS");
    Runtime.getRuntime().halt(0);
  }

  static void usage(String msg) {
    System.err.println(NAME + ": " + msg + "\nusage: JavaDriver --bootstrap HOST:PORT "
        + "--topic-prefix P --log-dir DIR [--timeout S] [--small] [--codecs c1,c2] "
        + "[--group-protocols classic,consumer]");
    System.exit(2);
  }

  static Properties props(String bootstrap, Object... kv) {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(AdminClientConfig.CLIENT_ID_CONFIG, "samsa-java-driver");
    for (int i = 0; i < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
    return p;
  }

  static void run(Map<String, String> a, boolean small) throws Exception {
    String bootstrap = a.get("--bootstrap");
    String prefix = a.get("--topic-prefix");
    String topic = prefix + "-java";
    step("kafka-clients " + org.apache.kafka.common.utils.AppInfoParser.getVersion() + ", java "
        + System.getProperty("java.version") + ", broker " + bootstrap);

    try (Admin admin = Admin.create(props(bootstrap))) {
      admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all()
          .get(20, TimeUnit.SECONDS);
      int n = admin.describeTopics(List.of(topic)).allTopicNames().get(20, TimeUnit.SECONDS)
          .get(topic).partitions().size();
      check(n == PARTITIONS, topic + " has " + n + " partitions, created " + PARTITIONS);
      step("created " + topic + " with " + PARTITIONS + " partitions");

      long tBase = System.currentTimeMillis() - 600_000;
      int count = small ? 3 : 30;
      List<Rec> produced = new ArrayList<>();
      for (String codec : a.get("--codecs").split(",")) {
        List<Rec> recs = makeRecords(codec, prefix, count, tBase, produced.size());
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props(bootstrap,
                 ProducerConfig.ACKS_CONFIG, "all", ProducerConfig.LINGER_MS_CONFIG, "50",
                 ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                 ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName(),
                 ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName()))) {
          List<java.util.concurrent.Future<RecordMetadata>> futs = new ArrayList<>();
          for (Rec r : recs)
            futs.add(p.send(new ProducerRecord<>(topic, r.partition, r.timestamp, r.key, r.value,
                                                 r.headers)));
          p.flush();
          for (int i = 0; i < futs.size(); i++) {
            RecordMetadata md = futs.get(i).get(20, TimeUnit.SECONDS);
            check(md.partition() == recs.get(i).partition, codec + ": record went to "
                + md.partition());
          }
        }
        produced.addAll(recs);
        step("produced " + recs.size() + " records with compression.type=" + codec
            + ", acks=all, idempotent");
      }
      Map<Integer, List<Rec>> perPart = new LinkedHashMap<>();
      for (int p = 0; p < PARTITIONS; p++) perPart.put(p, new ArrayList<>());
      for (Rec r : produced) perPart.get(r.partition).add(r);
      Map<Integer, Integer> counts = new LinkedHashMap<>();
      perPart.forEach((p, l) -> counts.put(p, l.size()));
      List<TopicPartition> tps = new ArrayList<>();
      for (int p = 0; p < PARTITIONS; p++) tps.add(new TopicPartition(topic, p));

      Properties cprops = props(bootstrap, ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false",
          ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
          ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName(),
          ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
      try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cprops)) {
        Map<TopicPartition, Long> begin = c.beginningOffsets(tps, Duration.ofSeconds(15));
        Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(15));
        for (TopicPartition tp : tps) {
          check(begin.get(tp) == 0 && end.get(tp) == perPart.get(tp.partition()).size(),
                "partition " + tp.partition() + ": offsets (" + begin.get(tp) + ", " + end.get(tp)
                    + "), expected (0, " + perPart.get(tp.partition()).size() + ")");
        }
        step("ListOffsets earliest/latest match the produced counts");

        c.assign(tps);
        c.seekToBeginning(tps);
        var got = consume(c, counts, 30_000);
        for (int p = 0; p < PARTITIONS; p++) comparePartition(p, perPart.get(p), got.get(p), "consumed");
        step("consumed all " + produced.size()
            + " records back byte-identical, in order per partition");

        int seekP = 2;
        int seekOff = perPart.get(seekP).size() / 3;
        c.assign(List.of(tps.get(seekP)));
        c.seek(tps.get(seekP), seekOff);
        var first = consume(c, Map.of(seekP, 1), 15_000).get(seekP).get(0);
        checkRecord(seekP, seekOff, perPart.get(seekP).get(seekOff), first, "after seek");
        step("seek to partition " + seekP + " offset " + seekOff + ": first record is the right one");

        int tsP = 1;
        int tsIdx = perPart.get(tsP).size() / 2;
        long ts = perPart.get(tsP).get(tsIdx).timestamp - 3;
        OffsetAndTimestamp ot = c.offsetsForTimes(Map.of(tps.get(tsP), ts), Duration.ofSeconds(15))
            .get(tps.get(tsP));
        check(ot != null && ot.offset() == tsIdx, "offsetsForTimes(" + ts + ") on partition "
            + tsP + " gave " + ot + ", expected " + tsIdx);
        c.assign(List.of(tps.get(tsP)));
        c.seek(tps.get(tsP), ot.offset());
        first = consume(c, Map.of(tsP, 1), 15_000).get(tsP).get(0);
        checkRecord(tsP, tsIdx, perPart.get(tsP).get(tsIdx), first, "after seek to time " + ts);
        step("offsetsForTimes on partition " + tsP + " -> offset " + tsIdx + ", first record matches");
      }

      for (String proto : a.get("--group-protocols").split(",")) {
        String group = prefix + "-java-" + proto;
        Properties gp = (Properties) cprops.clone();
        gp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        gp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, proto);
        if (proto.equals("classic")) {
          gp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
          gp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        }
        try (KafkaConsumer<byte[], byte[]> g = new KafkaConsumer<>(gp)) {
          g.subscribe(List.of(topic));
          var got = consume(g, counts, 40_000);
          for (int p = 0; p < PARTITIONS; p++)
            comparePartition(p, perPart.get(p), got.get(p), "group-consumed");
          // Stay in the group past one heartbeat interval so the member heartbeats at least once.
          long hold = System.currentTimeMillis() + 1500;
          while (System.currentTimeMillis() < hold)
            check(g.poll(Duration.ofMillis(300)).isEmpty(), "records after the end of the topic");
          g.commitSync(Duration.ofSeconds(15));
          Map<TopicPartition, OffsetAndMetadata> committed =
              g.committed(Set.copyOf(tps), Duration.ofSeconds(15));
          for (TopicPartition tp : tps) {
            OffsetAndMetadata om = committed.get(tp);
            check(om != null && om.offset() == perPart.get(tp.partition()).size(),
                  "group " + group + ": committed " + om + " for partition " + tp.partition());
          }
        }
        step("group " + group + " (group.protocol=" + proto
            + "): consumed everything, committed offsets read back");
      }

      checkSegments(a.get("--log-dir"), topic, produced);

      admin.deleteTopics(List.of(topic)).all().get(20, TimeUnit.SECONDS);
      long deadline = System.currentTimeMillis() + 15_000;
      while (admin.listTopics().names().get(15, TimeUnit.SECONDS).contains(topic)) {
        check(System.currentTimeMillis() < deadline, topic + " still listed 15s after delete");
        Thread.sleep(100);
      }
      step("deleted " + topic);
    }
  }

  static void checkSegments(String logDir, String topic, List<Rec> produced) throws Exception {
    Map<String, Integer> expected = new LinkedHashMap<>();
    for (Rec r : produced) expected.merge(r.codec, 1, Integer::sum);
    String json = "{\"topic\":\"" + topic + "\",\"partitions\":" + PARTITIONS + ",\"expected\":{"
        + expected.entrySet().stream().map(e -> "\"" + e.getKey() + "\":" + e.getValue())
              .collect(Collectors.joining(","))
        + "}}";
    Path spec = Files.createTempFile("java-driver-", ".json");
    try {
      Files.writeString(spec, json);
      String script = System.getProperty("segments.py", findSegmentsPy());
      Process pr = new ProcessBuilder("/usr/bin/python3", script, "check", logDir, spec.toString())
                       .redirectErrorStream(true).start();
      String out = new String(pr.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
      check(pr.waitFor(30, TimeUnit.SECONDS), "segments.py did not finish within 30s");
      check(pr.exitValue() == 0, "stored segments: " + out);
      for (String line : out.split("\n")) step(line);
    } finally {
      Files.deleteIfExists(spec);
    }
  }

  // The source launcher gives no reliable path of this file; the harness runs drivers from
  // tests/clients, and a run from the repository root works too.
  static String findSegmentsPy() {
    for (String c : List.of("segments.py", "tests/clients/segments.py", "../segments.py")) {
      if (new File(c).isFile()) return c;
    }
    throw new DriverError("segments.py not found from " + new File(".").getAbsolutePath()
        + " (run from tests/clients or pass -Dsegments.py=PATH)");
  }
}
