// Drives a broker with Apache Kafka's Java client (kafka-clients of any version from 3.9 on:
// tests/clients/java/clients.sh fetches one, perf/vs-kafka/kafka.sh has 4.1.1's): admin create,
// keyed produce with headers through every codec with acks=all (idempotent, the client's
// default), read-back by assignment, seek to an offset and to a timestamp, consumer groups with
// committed offsets, a check of the stored segments (tests/clients/segments.py), admin delete.
// With --full, the full flow of tests/clients/README.md: also topic configs (retention.ms shrinks
// the log, max.message.bytes refuses a batch), CreatePartitions, DeleteRecords, and a group
// described (members, offsets, lag) and reset. Exits non-zero on any failure.
//
// Run as a single-file source program, no build step:
//   java -cp "$(tests/clients/java/clients.sh classpath 4.1.2)" tests/clients/java/JavaDriver.java \
//        --bootstrap HOST:PORT --topic-prefix P --log-dir DIR [--timeout S] [--small] [--full]
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
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.common.config.ConfigResource;
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
    comparePartition(p, want, got, what, 0);
  }

  // `want`: the records produced from offset `first` on.
  static void comparePartition(int p, List<Rec> want, List<ConsumerRecord<byte[], byte[]>> got,
                               String what, int first) {
    check(got.size() == want.size(), "partition " + p + ": " + what + " " + got.size()
        + " records from offset " + first + ", produced " + want.size());
    for (int i = 0; i < want.size(); i++)
      checkRecord(p, first + i, want.get(i), got.get(i), what + " #" + i);
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
      else if (argv[i].equals("--full")) a.put("--full", "true");
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
        + "--topic-prefix P --log-dir DIR [--timeout S] [--small] [--full] [--codecs c1,c2] "
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

  // The numbered steps of the full flow (tests/clients/README.md), as driverlib.Flow does it:
  // each step's result is recorded and the run goes on after a failed step, so one run shows
  // every step that fails; a fatal step ends the run.
  interface StepBody {
    void run() throws Exception;
  }

  record Result(String id, String title, String error) {}

  static final List<Result> RESULTS = new ArrayList<>();

  static void flow(String id, String title, boolean fatal, StepBody body) {
    long t = System.currentTimeMillis();
    String err = null;
    try {
      body.run();
    } catch (DriverError e) {
      err = e.getMessage();
    } catch (Throwable e) {
      Throwable c = e instanceof java.util.concurrent.ExecutionException && e.getCause() != null
          ? e.getCause() : e;
      if (!(c instanceof org.apache.kafka.common.KafkaException)) e.printStackTrace();
      err = c.getClass().getSimpleName() + ": " + c.getMessage();
    }
    String took = String.format("%.1fs", (System.currentTimeMillis() - t) / 1000.0);
    RESULTS.add(new Result(id, title, err));
    step("step " + id + " (" + title + ") " + (err == null ? "passed in " + took
        : "FAILED after " + took + ": " + err));
    if (err != null && fatal) finish();
  }

  static void finish() {
    for (Result r : RESULTS)
      System.out.printf("RESULT %-6s %-28s %s%n", r.id, r.title,
                        r.error == null ? "PASS" : "FAIL: " + r.error);
    List<String> bad = RESULTS.stream().filter(r -> r.error != null).map(r -> r.id).toList();
    if (!bad.isEmpty()) throw new DriverError("steps failed: " + String.join(", ", bad));
  }

  // The full flow's fixed figures: the same as tests/clients/driverlib.py's.
  static final String RET_SUFFIX = "-ret";
  static final int SEGMENT_MS = 100, RET_RECORDS = 6, RETENTION_MS = 1000;
  static final int MAX_MESSAGE_BYTES = 2048, BIG_VALUE_BYTES = 8192;
  static final int NEW_PARTITIONS = 4, NEW_RECORDS = 3, LAG = 2;

  static final class State {
    Map<Integer, List<Rec>> perPart = new LinkedHashMap<>();
    List<Rec> produced = new ArrayList<>();
    long start0 = 0;
  }

  static KafkaProducer<byte[], byte[]> producer(String bootstrap, Object... kv) {
    Properties p = props(bootstrap, ProducerConfig.ACKS_CONFIG, "all",
        ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName(),
        ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    for (int i = 0; i < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
    return new KafkaProducer<>(p);
  }

  static void send(KafkaProducer<byte[], byte[]> p, String topic, List<Rec> recs, boolean each)
      throws Exception {
    List<java.util.concurrent.Future<RecordMetadata>> futs = new ArrayList<>();
    for (Rec r : recs) {
      futs.add(p.send(new ProducerRecord<>(topic, r.partition, r.timestamp, r.key, r.value,
                                           r.headers)));
      if (each) p.flush();
    }
    p.flush();
    for (int i = 0; i < futs.size(); i++) {
      RecordMetadata md = futs.get(i).get(20, TimeUnit.SECONDS);
      check(md.partition() == recs.get(i).partition, topic + ": record went to partition "
          + md.partition());
    }
  }

  static void run(Map<String, String> a, boolean small) throws Exception {
    String bootstrap = a.get("--bootstrap");
    String prefix = a.get("--topic-prefix");
    boolean full = a.containsKey("--full");
    String topic = prefix + "-java";
    step("kafka-clients " + org.apache.kafka.common.utils.AppInfoParser.getVersion() + ", java "
        + System.getProperty("java.version") + ", broker " + bootstrap);
    State st = new State();
    List<TopicPartition> tps = new ArrayList<>();
    for (int p = 0; p < PARTITIONS; p++) tps.add(new TopicPartition(topic, p));

    try (Admin admin = Admin.create(props(bootstrap))) {
      flow("1", "create topic", true, () -> {
        admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all()
            .get(20, TimeUnit.SECONDS);
        int n = admin.describeTopics(List.of(topic)).allTopicNames().get(20, TimeUnit.SECONDS)
            .get(topic).partitions().size();
        check(n == PARTITIONS, topic + " has " + n + " partitions, created " + PARTITIONS);
        step("created " + topic + " with " + PARTITIONS + " partitions");
      });

      flow("2", "produce every codec", true, () -> {
        long tBase = System.currentTimeMillis() - 600_000;
        int count = small ? 3 : 30;
        for (String codec : a.get("--codecs").split(",")) {
          List<Rec> recs = makeRecords(codec, prefix, count, tBase, st.produced.size());
          try (KafkaProducer<byte[], byte[]> p = producer(bootstrap,
                   ProducerConfig.LINGER_MS_CONFIG, "50",
                   ProducerConfig.COMPRESSION_TYPE_CONFIG, codec)) {
            send(p, topic, recs, false);
          }
          st.produced.addAll(recs);
          step("produced " + recs.size() + " records with compression.type=" + codec
              + ", acks=all, idempotent");
        }
        for (int p = 0; p < PARTITIONS; p++) st.perPart.put(p, new ArrayList<>());
        for (Rec r : st.produced) st.perPart.get(r.partition).add(r);
        checkSegments(a.get("--log-dir"), topic, st.produced);
      });
      Map<Integer, List<Rec>> perPart = st.perPart;
      Map<Integer, Integer> counts = new LinkedHashMap<>();
      perPart.forEach((p, l) -> counts.put(p, l.size()));

      Properties cprops = consumerProps(bootstrap);
      try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cprops)) {
        flow("3", "consume byte-identical", false, () -> {
          Map<TopicPartition, Long> begin = c.beginningOffsets(tps, Duration.ofSeconds(15));
          Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(15));
          for (TopicPartition tp : tps) {
            check(begin.get(tp) == 0 && end.get(tp) == perPart.get(tp.partition()).size(),
                  "partition " + tp.partition() + ": offsets (" + begin.get(tp) + ", "
                      + end.get(tp) + "), expected (0, " + perPart.get(tp.partition()).size()
                      + ")");
          }
          step("ListOffsets earliest/latest match the produced counts");
          c.assign(tps);
          c.seekToBeginning(tps);
          var got = consume(c, counts, 30_000);
          for (int p = 0; p < PARTITIONS; p++)
            comparePartition(p, perPart.get(p), got.get(p), "consumed");
          step("consumed all " + st.produced.size()
              + " records back byte-identical, in order per partition");
        });

        flow("4a", "seek to an offset", false, () -> {
          int seekP = 2;
          int seekOff = perPart.get(seekP).size() / 3;
          c.assign(List.of(tps.get(seekP)));
          c.seek(tps.get(seekP), seekOff);
          var first = consume(c, Map.of(seekP, 1), 15_000).get(seekP).get(0);
          checkRecord(seekP, seekOff, perPart.get(seekP).get(seekOff), first, "after seek");
          step("seek to partition " + seekP + " offset " + seekOff
              + ": first record is the right one");
        });

        flow("4b", "seek to a timestamp", false, () -> {
          int tsP = 1;
          int tsIdx = perPart.get(tsP).size() / 2;
          long ts = perPart.get(tsP).get(tsIdx).timestamp - 3;
          OffsetAndTimestamp ot = c.offsetsForTimes(Map.of(tps.get(tsP), ts),
                                                    Duration.ofSeconds(15)).get(tps.get(tsP));
          check(ot != null && ot.offset() == tsIdx, "offsetsForTimes(" + ts + ") on partition "
              + tsP + " gave " + ot + ", expected " + tsIdx);
          c.assign(List.of(tps.get(tsP)));
          c.seek(tps.get(tsP), ot.offset());
          var first = consume(c, Map.of(tsP, 1), 15_000).get(tsP).get(0);
          checkRecord(tsP, tsIdx, perPart.get(tsP).get(tsIdx), first, "after seek to time " + ts);
          step("offsetsForTimes on partition " + tsP + " -> offset " + tsIdx
              + ", first record matches");
        });
      }

      if (full) {
        fullSteps(a, admin, st, topic);
      } else {
        flow("8", "group commit", false, () -> groupCommit(a, topic, st, tps));
      }

      flow("9", "delete topic", false, () -> {
        List<String> topics = full ? List.of(topic, topic + RET_SUFFIX) : List.of(topic);
        admin.deleteTopics(topics).all().get(20, TimeUnit.SECONDS);
        long deadline = System.currentTimeMillis() + 15_000;
        while (admin.listTopics().names().get(15, TimeUnit.SECONDS).stream()
                   .anyMatch(topics::contains)) {
          check(System.currentTimeMillis() < deadline, topics + " still listed 15s after delete");
          Thread.sleep(100);
        }
        step("deleted " + String.join(", ", topics));
      });
    }
    finish();
  }

  static Properties consumerProps(String bootstrap, Object... kv) {
    Properties p = props(bootstrap, ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false",
        ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
        ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName(),
        ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    for (int i = 0; i < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
    return p;
  }

  static void groupCommit(Map<String, String> a, String topic, State st,
                          List<TopicPartition> tps) {
    Map<Integer, Integer> counts = new LinkedHashMap<>();
    st.perPart.forEach((p, l) -> counts.put(p, l.size()));
    for (String proto : a.get("--group-protocols").split(",")) {
      String group = a.get("--topic-prefix") + "-java-" + proto;
      Properties gp = groupProps(a, group, proto);
      try (KafkaConsumer<byte[], byte[]> g = new KafkaConsumer<>(gp)) {
        g.subscribe(List.of(topic));
        var got = consume(g, counts, 40_000);
        for (int p = 0; p < PARTITIONS; p++)
          comparePartition(p, st.perPart.get(p), got.get(p), "group-consumed");
        // Stay in the group past one heartbeat interval so the member heartbeats at least once.
        long hold = System.currentTimeMillis() + 1500;
        while (System.currentTimeMillis() < hold)
          check(g.poll(Duration.ofMillis(300)).isEmpty(), "records after the end of the topic");
        g.commitSync(Duration.ofSeconds(15));
        Map<TopicPartition, OffsetAndMetadata> committed =
            g.committed(Set.copyOf(tps), Duration.ofSeconds(15));
        for (TopicPartition tp : tps) {
          OffsetAndMetadata om = committed.get(tp);
          check(om != null && om.offset() == st.perPart.get(tp.partition()).size(),
                "group " + group + ": committed " + om + " for partition " + tp.partition());
        }
      }
      step("group " + group + " (group.protocol=" + proto
          + "): consumed everything, committed offsets read back");
    }
  }

  static Properties groupProps(Map<String, String> a, String group, String proto) {
    Properties gp = consumerProps(a.get("--bootstrap"), ConsumerConfig.GROUP_ID_CONFIG, group,
                                  ConsumerConfig.GROUP_PROTOCOL_CONFIG, proto);
    if (proto.equals("classic")) {
      gp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
      gp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
    }
    return gp;
  }

  static Map<String, ConfigEntry> topicConfigs(Admin admin, String topic) throws Exception {
    ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
    Map<String, ConfigEntry> out = new HashMap<>();
    for (ConfigEntry e : admin.describeConfigs(List.of(r)).all().get(15, TimeUnit.SECONDS).get(r)
             .entries())
      out.put(e.name(), e);
    return out;
  }

  // Kafka answers an alter once the controller committed it; its brokers apply the metadata
  // record a moment later, so DescribeConfigs is asked until it shows the new value.
  static ConfigEntry awaitConfig(Admin admin, String topic, String key, String want)
      throws Exception {
    long deadline = System.currentTimeMillis() + 10_000;
    while (true) {
      ConfigEntry e = topicConfigs(admin, topic).get(key);
      if (e != null && want.equals(e.value())) return e;
      check(System.currentTimeMillis() < deadline, topic + ": DescribeConfigs " + key + " = "
          + e + " 10s after it was set to " + want);
      Thread.sleep(100);
    }
  }

  static long offset(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
    return admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get(15, TimeUnit.SECONDS)
        .offset();
  }

  static void setConfig(Admin admin, String topic, String key, String value) throws Exception {
    ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
    admin.incrementalAlterConfigs(Map.of(r, List.of(new AlterConfigOp(new ConfigEntry(key, value),
        AlterConfigOp.OpType.SET)))).all().get(15, TimeUnit.SECONDS);
  }

  static void fullSteps(Map<String, String> a, Admin admin, State st, String topic) {
    String bootstrap = a.get("--bootstrap");
    String prefix = a.get("--topic-prefix");
    String ret = topic + RET_SUFFIX;
    TopicPartition ret0 = new TopicPartition(ret, 0);

    flow("5a", "retention.ms shrinks the log", false, () -> {
      admin.createTopics(List.of(new NewTopic(ret, 1, (short) 1)
          .configs(Map.of("segment.ms", String.valueOf(SEGMENT_MS))))).all()
          .get(20, TimeUnit.SECONDS);
      long t0 = System.currentTimeMillis() - 600_000;
      List<Rec> recs = new ArrayList<>();
      for (int i = 0; i < RET_RECORDS; i++)
        recs.add(new Rec(0, ascii("ret-" + i), concat(ascii("none|" + prefix + "|ret|" + i + "|"),
            FILLER), List.of(new RecordHeader("r", ascii(String.valueOf(i)))), t0 + i * 1000L,
            "none"));
      try (KafkaProducer<byte[], byte[]> p = producer(bootstrap,
               ProducerConfig.LINGER_MS_CONFIG, "0")) {
        send(p, ret, recs, true);
      }
      check(offset(admin, ret0, OffsetSpec.earliest()) == 0, ret + ": earliest is not 0");
      step(ret + ": " + RET_RECORDS + " records in batches of their own, 1 s of record time "
          + "apart, segment.ms=" + SEGMENT_MS);
      setConfig(admin, ret, "retention.ms", String.valueOf(RETENTION_MS));
      ConfigEntry e = awaitConfig(admin, ret, "retention.ms", String.valueOf(RETENTION_MS));
      check(e.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
            ret + ": retention.ms has source " + e.source());
      step("IncrementalAlterConfigs retention.ms=" + RETENTION_MS + "; DescribeConfigs shows "
          + e.value() + " (" + e.source() + ")");
      long deadline = System.currentTimeMillis() + 20_000;
      long start;
      while ((start = offset(admin, ret0, OffsetSpec.earliest())) == 0) {
        check(System.currentTimeMillis() < deadline, ret
            + "'s log start did not move within 20s of retention.ms=" + RETENTION_MS);
        Thread.sleep(300);
      }
      step("retention deleted old segments: " + ret + "-0 now starts at offset " + start);
    });

    flow("5b", "max.message.bytes refuses", false, () -> {
      setConfig(admin, ret, "max.message.bytes", String.valueOf(MAX_MESSAGE_BYTES));
      awaitConfig(admin, ret, "max.message.bytes", String.valueOf(MAX_MESSAGE_BYTES));
      step("IncrementalAlterConfigs max.message.bytes=" + MAX_MESSAGE_BYTES);
      long end = offset(admin, ret0, OffsetSpec.latest());
      byte[] big = new byte[BIG_VALUE_BYTES];
      new java.util.Random().nextBytes(big);
      try (KafkaProducer<byte[], byte[]> p = producer(bootstrap,
               ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "15000",
               ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000")) {
        try {
          p.send(new ProducerRecord<>(ret, 0, ascii("big"), big)).get(20, TimeUnit.SECONDS);
          throw new DriverError("a " + BIG_VALUE_BYTES + "-byte record was accepted with "
              + "max.message.bytes=" + MAX_MESSAGE_BYTES);
        } catch (java.util.concurrent.ExecutionException x) {
          check(x.getCause() instanceof org.apache.kafka.common.errors.RecordTooLargeException,
                "the large record failed with " + x.getCause() + ", expected RecordTooLarge");
          step("a " + BIG_VALUE_BYTES + "-byte record is refused: " + x.getCause());
        }
      }
      long after = offset(admin, ret0, OffsetSpec.latest());
      check(after == end, ret + ": end offset moved from " + end + " to " + after);
    });

    Map<Integer, List<Rec>> parts = new LinkedHashMap<>(st.perPart);
    int np = NEW_PARTITIONS - 1;
    flow("6", "add partitions", false, () -> {
      admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(NEW_PARTITIONS))).all()
          .get(20, TimeUnit.SECONDS);
      long deadline = System.currentTimeMillis() + 15_000;
      while (admin.describeTopics(List.of(topic)).allTopicNames().get(15, TimeUnit.SECONDS)
                 .get(topic).partitions().size() != NEW_PARTITIONS) {
        check(System.currentTimeMillis() < deadline, topic + " does not show " + NEW_PARTITIONS
            + " partitions 15s after CreatePartitions");
        Thread.sleep(200);
      }
      long t0 = System.currentTimeMillis() - 300_000;
      List<Rec> recs = new ArrayList<>();
      for (int i = 0; i < NEW_RECORDS; i++)
        recs.add(new Rec(np, concat(ascii("new-" + i), new byte[] {0, (byte) 255}),
            concat(ascii("none|" + prefix + "|new|" + i + "|"), FILLER,
                   new byte[] {0, (byte) (200 + i)}),
            List.of(new RecordHeader("new", ascii(String.valueOf(i))),
                    new RecordHeader("bin", new byte[] {0, (byte) 255})),
            t0 + i * 10L, "lz4"));
      // The producer's metadata may predate the new partition: it refreshes when it sees a
      // partition number beyond what it knows.
      try (KafkaProducer<byte[], byte[]> p = producer(bootstrap,
               ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4")) {
        send(p, topic, recs, false);
      }
      try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap))) {
        TopicPartition tp = new TopicPartition(topic, np);
        c.assign(List.of(tp));
        c.seekToBeginning(List.of(tp));
        comparePartition(np, recs, consume(c, Map.of(np, NEW_RECORDS), 20_000).get(np),
                         "consumed");
      }
      parts.put(np, recs);
      step("CreatePartitions " + topic + " -> " + NEW_PARTITIONS + "; produced " + NEW_RECORDS
          + " records to partition " + np + " and read them back");
    });

    flow("7", "delete records", false, () -> {
      int cut = st.perPart.get(0).size() / 2;
      TopicPartition tp0 = new TopicPartition(topic, 0);
      long low = admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(cut)))
          .lowWatermarks().get(tp0).get(15, TimeUnit.SECONDS).lowWatermark();
      check(low == cut, "DeleteRecords answered low watermark " + low + ", expected " + cut);
      check(offset(admin, tp0, OffsetSpec.earliest()) == cut,
            topic + "-0: ListOffsets earliest is not " + cut + " after DeleteRecords");
      try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap))) {
        c.assign(List.of(tp0));
        c.seekToBeginning(List.of(tp0));
        var first = consume(c, Map.of(0, 1), 15_000).get(0).get(0);
        checkRecord(0, cut, st.perPart.get(0).get(cut), first,
                    "from the beginning after DeleteRecords");
      }
      st.start0 = cut;
      step("DeleteRecords " + topic + "-0 before " + cut + ": low watermark " + cut
          + ", consuming from the beginning starts there");
    });

    String proto = a.get("--group-protocols").split(",")[0];
    String group = prefix + "-java-" + proto;
    flow("8a", "describe group, lag", false, () -> {
      int n = parts.size();
      Map<Integer, Integer> want = new LinkedHashMap<>();
      parts.forEach((p, l) -> want.put(p, l.size() - (p == 0 ? (int) st.start0 : 0)));
      Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
      parts.forEach((p, l) -> commit.put(new TopicPartition(topic, p),
                                         new OffsetAndMetadata(l.size() - LAG)));
      try (KafkaConsumer<byte[], byte[]> g = new KafkaConsumer<>(groupProps(a, group, proto))) {
        g.subscribe(List.of(topic));
        var got = consume(g, want, 40_000);
        for (int p : parts.keySet()) {
          int from = p == 0 ? (int) st.start0 : 0;
          comparePartition(p, parts.get(p).subList(from, parts.get(p).size()), got.get(p),
                           "group-consumed", from);
        }
        g.commitSync(commit, Duration.ofSeconds(15));
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
            .describedGroups().get(group).get(15, TimeUnit.SECONDS);
        check(d.members().size() == 1, "group " + group + ": " + d.members().size()
            + " members, want 1");
        MemberDescription m = d.members().iterator().next();
        List<Integer> assigned = m.assignment().topicPartitions().stream()
            .filter(tp -> tp.topic().equals(topic)).map(TopicPartition::partition).sorted()
            .toList();
        check(assigned.size() == n, "group " + group + ": member " + m.consumerId()
            + " is assigned " + assigned + ", want 0.." + (n - 1));
        String state = d.state().name();
        check(state.equals("STABLE"), "group " + group + " is " + state + ", want STABLE");
        step("describeConsumerGroups: " + state + ", member " + m.consumerId() + " ("
            + m.clientId() + ", " + m.host() + ") holds partitions " + assigned);
        Map<TopicPartition, OffsetAndMetadata> have = admin.listConsumerGroupOffsets(group)
            .partitionsToOffsetAndMetadata().get(15, TimeUnit.SECONDS);
        for (var e : commit.entrySet()) {
          OffsetAndMetadata h = have.get(e.getKey());
          check(h != null && h.offset() == e.getValue().offset(), "group " + group + ": "
              + e.getKey() + " committed " + h + ", want " + e.getValue().offset());
        }
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        for (TopicPartition tp : commit.keySet()) latest.put(tp, OffsetSpec.latest());
        var ends = admin.listOffsets(latest).all().get(15, TimeUnit.SECONDS);
        for (TopicPartition tp : commit.keySet()) {
          long lag = ends.get(tp).offset() - have.get(tp).offset();
          check(lag == LAG, "group " + group + ": lag " + lag + " on " + tp + ", want " + LAG);
        }
        step("group offsets committed at end-" + LAG + ", lag " + LAG + " on every partition");
      }
    });

    flow("8b", "reset group offsets", false, () -> {
      long deadline = System.currentTimeMillis() + 15_000;
      while (true) {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
            .describedGroups().get(group).get(15, TimeUnit.SECONDS);
        if (d.state().name().equals("EMPTY") && d.members().isEmpty()) break;
        check(System.currentTimeMillis() < deadline, "group " + group + " is " + d.state()
            + " 15s after its member left");
        Thread.sleep(200);
      }
      Map<Integer, Integer> reset = new LinkedHashMap<>();
      for (int p : parts.keySet()) reset.put(p, p == 0 ? (int) st.start0 + 1 : 1 + p % 2);
      Map<TopicPartition, OffsetAndMetadata> to = new HashMap<>();
      reset.forEach((p, o) -> to.put(new TopicPartition(topic, p), new OffsetAndMetadata(o)));
      admin.alterConsumerGroupOffsets(group, to).all().get(15, TimeUnit.SECONDS);
      Map<TopicPartition, OffsetAndMetadata> have = admin.listConsumerGroupOffsets(group)
          .partitionsToOffsetAndMetadata().get(15, TimeUnit.SECONDS);
      for (var e : to.entrySet())
        check(have.get(e.getKey()) != null
                  && have.get(e.getKey()).offset() == e.getValue().offset(),
              "group " + group + ": " + e.getKey() + " at " + have.get(e.getKey())
                  + " after reset to " + e.getValue().offset());
      Map<Integer, Integer> want = new LinkedHashMap<>();
      reset.forEach((p, o) -> want.put(p, parts.get(p).size() - o));
      try (KafkaConsumer<byte[], byte[]> g = new KafkaConsumer<>(groupProps(a, group, proto))) {
        g.subscribe(List.of(topic));
        var got = consume(g, want, 40_000);
        for (int p : parts.keySet())
          comparePartition(p, parts.get(p).subList(reset.get(p), parts.get(p).size()),
                           got.get(p), "consumed after reset", reset.get(p));
      }
      step("reset group offsets to " + reset
          + "; the group consumed from there, byte-identical");
    });
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
