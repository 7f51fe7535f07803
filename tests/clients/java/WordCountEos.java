// The Kafka Streams application of tests/integration/streams_eos_test.py: a word count with
// processing.guarantee=exactly_once_v2, on Apache Kafka's Streams 4.1.1 jars
// (perf/vs-kafka/kafka.sh classpath). Lines of --input are split into words, grouped by word
// (a repartition topic) and counted (a state store with its changelog); every count update goes
// to --output as (word, count): the record cache is off, so a word's counts in the output are
// exactly 1, 2, 3, ... when processing is exactly once. Runs until killed, or --run-ms.
//
//   java -cp "$(perf/vs-kafka/kafka.sh classpath)" tests/clients/java/WordCountEos.java \
//        --bootstrap H:P --app-id ID --input IN --output OUT --state-dir DIR [--run-ms N]

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public class WordCountEos {
  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, a.get("app-id"));
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.STATE_DIR_CONFIG, a.get("state-dir"));
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
    p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
    p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), "10000");
    p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "10000");

    StreamsBuilder b = new StreamsBuilder();
    b.stream(a.get("input"), Consumed.with(Serdes.String(), Serdes.String()))
        .flatMapValues(v -> Arrays.asList(v.split(" ")))
        .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
        .count(Materialized.as("counts"))
        .toStream()
        .to(a.get("output"), Produced.with(Serdes.String(), Serdes.Long()));

    KafkaStreams streams = new KafkaStreams(b.build(), p);
    streams.setUncaughtExceptionHandler(e -> {
      System.err.println("stream thread failed: " + e);
      e.printStackTrace();
      return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
          .StreamThreadExceptionResponse.REPLACE_THREAD;
    });
    streams.setStateListener((now, before) -> System.out.println("state " + before + " -> " + now));
    streams.start();
    long runMs = Long.parseLong(a.getOrDefault("run-ms", "600000"));
    Thread.sleep(runMs);
    streams.close();
  }
}
