// The consume-transform-produce loop of the transactions fault test (tests/cluster/ctp_test.py),
// on Apache Kafka's Java client: it reads --input with read_committed (group --group, static
// member --instance so a restart takes its place at once), writes "out|<value>" for each record
// to the same partition of --output inside a transaction (transactional.id --txn-id, the same
// for every incarnation: a restart fences the one before), commits the input offsets in the
// same transaction (sendOffsetsToTransaction), and commits.
//
// An abortable error aborts the transaction and rewinds the consumer to the committed offsets;
// a fencing error (a newer incarnation took over) or an abort that fails too exits 3, and the
// harness starts a new incarnation. It exits 0 after --idle-exit-ms without records. Progress
// goes to stdout as "committed N" lines, errors to stderr.
//
//   java -cp "$(perf/vs-kafka/kafka.sh classpath)" tests/clients/java/CtpLoop.java \
//        --bootstrap H:P,... --input IN --output OUT --group G --txn-id T --instance I
//        [--idle-exit-ms 600000] [--txn-timeout-ms 10000]

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class CtpLoop {
  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
    String bootstrap = a.get("bootstrap"), input = a.get("input"), output = a.get("output");
    long idleExit = Long.parseLong(a.getOrDefault("idle-exit-ms", "600000"));

    Properties c = new Properties();
    c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    c.put(ConsumerConfig.GROUP_ID_CONFIG, a.get("group"));
    c.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, a.get("instance"));
    c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100");
    c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
    c.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
    c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.get("txn-id"));
    p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, a.getOrDefault("txn-timeout-ms", "10000"));
    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

    long committed = 0, aborted = 0;
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c);
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
      producer.initTransactions();
      consumer.subscribe(List.of(input));
      long lastRecord = System.currentTimeMillis();
      while (System.currentTimeMillis() - lastRecord < idleExit) {
        ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
        if (recs.isEmpty()) continue;
        lastRecord = System.currentTimeMillis();
        try {
          producer.beginTransaction();
          Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
          for (ConsumerRecord<byte[], byte[]> r : recs) {
            byte[] v = ("out|" + new String(r.value(), StandardCharsets.UTF_8))
                .getBytes(StandardCharsets.UTF_8);
            producer.send(new ProducerRecord<>(output, r.partition(), r.key(), v));
            offsets.put(new TopicPartition(r.topic(), r.partition()),
                new OffsetAndMetadata(r.offset() + 1));
          }
          producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
          producer.commitTransaction();
          committed += recs.count();
          System.out.println("committed " + committed);
        } catch (ProducerFencedException | InvalidProducerEpochException
            | FencedInstanceIdException e) {
          System.err.println("fenced: " + e);
          System.exit(3);
        } catch (KafkaException e) {
          System.err.println("aborting: " + e);
          try {
            producer.abortTransaction();
          } catch (KafkaException e2) {
            System.err.println("abort failed: " + e2);
            System.exit(3);
          }
          ++aborted;
          // The aborted records are read again: back to the committed offsets.
          Set<TopicPartition> assigned = consumer.assignment();
          Map<TopicPartition, OffsetAndMetadata> at = consumer.committed(assigned);
          for (TopicPartition tp : assigned) {
            OffsetAndMetadata om = at.get(tp);
            if (om != null) {
              consumer.seek(tp, om.offset());
            } else {
              consumer.seekToBeginning(List.of(tp));
            }
          }
        }
      }
    }
    System.out.println("{\"committed\": " + committed + ", \"aborted\": " + aborted + "}");
  }
}
