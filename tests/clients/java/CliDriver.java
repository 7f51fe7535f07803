// Drives a broker with Apache Kafka's command-line tools (4.1.1, the jars perf/vs-kafka/kafka.sh
// fetches) through the full flow of tests/clients/README.md:
//   kafka-topics           create, describe, --alter --partitions, delete, list
//   kafka-console-producer keyed records with headers, every codec (--compression-codec)
//   kafka-console-consumer read back (partition, offset, timestamp, headers, key, value printed)
//   kafka-get-offsets      earliest, latest, by timestamp
//   kafka-configs          --alter --add-config retention.ms / max.message.bytes, --describe --all
//   kafka-log-dirs         partition sizes before and after retention
//   kafka-delete-records   --offset-json-file
//   kafka-consumer-groups  --describe (offsets, lag, --members, --state), --reset-offsets
//
// Each tool runs through its main class with the arguments a user would type (printed as
// `$ kafka-... args`), in this one JVM: a JVM per tool costs 3-8 s of this 2-core machine, and
// the flow runs some 60 tools. What in-process needs: Kafka's Exit procedures are replaced
// (an exit ends the tool's run with its code instead of the JVM), stdin/stdout/stderr are
// per run, and the shutdown hooks a tool registers (ConsoleProducer closes, and so flushes, its
// producer in one) run when its run ends, as they would at JVM exit; a console consumer left
// running in the background is stopped by running its hook, as Ctrl-C would.
//
// What the tools cannot do, and what covers it instead:
//   - the console producer reads UTF-8 lines: values and keys are text (with multi-byte
//     characters), never arbitrary bytes, and never null (the other drivers cover both);
//   - it cannot pick a partition nor a timestamp: records go where the default partitioner
//     puts their key (murmur2, checked), carry CreateTime = send time, and step 4b looks up the
//     timestamp the console consumer printed for a record produced after a pause;
//   - it sends batches asynchronously and exits 0 even when the broker refuses them: the
//     oversized record of step 5b is sent with --sync, which fails the tool.
//
//   java -cp "$(perf/vs-kafka/kafka.sh classpath)" tests/clients/java/CliDriver.java \
//        --bootstrap HOST:PORT --topic-prefix P --log-dir DIR [--timeout S] [--small]
//        [--codecs none,gzip,...] [--full]

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.kafka.common.utils.Exit;
import org.apache.kafka.common.utils.Utils;

public class CliDriver {
  static final String NAME = "kafka_cli";
  static final int PARTITIONS = 3;
  static final List<String> ALL_CODECS = List.of("none", "gzip", "snappy", "lz4", "zstd");
  static final long T0 = System.currentTimeMillis();
  // The full flow's fixed figures: the same as tests/clients/driverlib.py's.
  static final String RET_SUFFIX = "-ret";
  static final int SEGMENT_MS = 100, RET_RECORDS = 6, RETENTION_MS = 1000;
  static final int MAX_MESSAGE_BYTES = 2048, BIG_VALUE_BYTES = 8192;
  static final int NEW_PARTITIONS = 4, NEW_RECORDS = 3, LAG = 2;

  static final Map<String, String> TOOLS = Map.of(
      "kafka-topics", "org.apache.kafka.tools.TopicCommand",
      "kafka-configs", "kafka.admin.ConfigCommand",
      "kafka-console-producer", "org.apache.kafka.tools.ConsoleProducer",
      "kafka-console-consumer", "org.apache.kafka.tools.consumer.ConsoleConsumer",
      "kafka-consumer-groups", "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
      "kafka-delete-records", "org.apache.kafka.tools.DeleteRecordsCommand",
      "kafka-log-dirs", "org.apache.kafka.tools.LogDirsCommand",
      "kafka-get-offsets", "org.apache.kafka.tools.GetOffsetShell");

  static final class DriverError extends RuntimeException {
    DriverError(String m) {
      super(m);
    }
  }

  static void check(boolean cond, String msg) {
    if (!cond) throw new DriverError(msg);
  }

  static final PrintStream REAL_OUT = System.out;
  static final PrintStream REAL_ERR = System.err;

  static void step(String msg) {
    REAL_OUT.printf("[%s %6.2fs] %s%n", NAME, (System.currentTimeMillis() - T0) / 1000.0, msg);
    REAL_OUT.flush();
  }

  // ---- running a tool in this JVM ----------------------------------------------------------

  // A tool's output goes to the buffers of the run it belongs to: the thread that runs the tool
  // and every thread it starts (InheritableThreadLocal). Scala's Console keeps the System.out it
  // first saw, so the routing stream is installed once, before any tool runs.
  static final InheritableThreadLocal<ToolRun> CURRENT = new InheritableThreadLocal<>();

  static final class Router extends OutputStream {
    final boolean err;

    Router(boolean err) {
      this.err = err;
    }

    OutputStream target() {
      ToolRun r = CURRENT.get();
      if (r == null) return err ? REAL_ERR : REAL_OUT;
      return err ? r.err : r.out;
    }

    @Override
    public void write(int b) throws IOException {
      target().write(b);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      target().write(b, off, len);
    }
  }

  // Thrown by Kafka's Exit.exit/halt inside a tool; an Error so that the tools' own
  // `catch (Exception e)` blocks do not swallow it.
  static final class ToolExit extends Error {
    final int code;

    ToolExit(int code) {
      super("exit " + code, null, false, false);
      this.code = code;
    }
  }

  static final class ToolRun {
    final String tool;
    final List<String> args;
    final ByteArrayOutputStream out = new ByteArrayOutputStream();
    final ByteArrayOutputStream err = new ByteArrayOutputStream();
    final List<Runnable> hooks = new ArrayList<>();
    volatile Integer code;
    Thread thread;

    ToolRun(String tool, List<String> args) {
      this.tool = tool;
      this.args = args;
    }

    String out() {
      synchronized (out) {
        return out.toString(StandardCharsets.UTF_8);
      }
    }

    String err() {
      synchronized (err) {
        return err.toString(StandardCharsets.UTF_8);
      }
    }

    String describe() {
      return "$ " + tool + " " + String.join(" ", args) + "\n  exit " + code + "\n  stdout: "
          + abbreviate(out()) + "\n  stderr: " + abbreviate(err());
    }

    // One line saying what failed (the tool's own error line), then the whole run.
    String failure() {
      String why = "";
      for (String l : (out() + "\n" + err()).split("\n")) {
        if (l.contains("Error") || l.contains("Exception") || l.contains("not supported")) {
          why = ": " + l.strip();
          break;
        }
      }
      if (why.isEmpty() && !err().isBlank()) why = ": " + err().strip().split("\n")[0];
      return tool + " " + (args.size() > 2 ? args.get(2) : "") + " exited " + code + why + "\n"
          + describe();
    }

    // What the JVM would do at exit: run the shutdown hooks the tool registered.
    void runHooks() {
      List<Runnable> hs;
      synchronized (hooks) {
        hs = new ArrayList<>(hooks);
        hooks.clear();
      }
      for (Runnable h : hs) h.run();
    }

    void join(long timeoutMs) throws InterruptedException {
      thread.join(timeoutMs);
      check(!thread.isAlive(), tool + " still running after " + timeoutMs / 1000 + "s:\n"
          + describe());
    }
  }

  static String abbreviate(String s) {
    s = s.strip();
    return s.length() <= 4000 ? s : s.substring(0, 2000) + "\n...\n" + s.substring(s.length() - 2000);
  }

  static void installExitHooks() {
    System.setOut(new PrintStream(new Router(false), true, StandardCharsets.UTF_8));
    System.setErr(new PrintStream(new Router(true), true, StandardCharsets.UTF_8));
    Exit.setExitProcedure((code, msg) -> {
      ToolRun r = CURRENT.get();
      if (r != null && r.code == null) r.code = code;
      throw new ToolExit(code);
    });
    Exit.setHaltProcedure((code, msg) -> {
      throw new ToolExit(code);
    });
    Exit.setShutdownHookAdder((name, hook) -> {
      ToolRun r = CURRENT.get();
      check(r != null, "a shutdown hook registered outside a tool run");
      synchronized (r.hooks) {
        r.hooks.add(hook);
      }
    });
  }

  static String bootstrap;

  // Starts `tool args` on a thread of its own; stdin is `in` (empty when null).
  static ToolRun start(InputStream in, String tool, String... args) {
    String main = TOOLS.get(tool);
    check(main != null, "unknown tool " + tool);
    List<String> argv = new ArrayList<>(List.of("--bootstrap-server", bootstrap));
    argv.addAll(List.of(args));
    ToolRun r = new ToolRun(tool, argv);
    REAL_OUT.println("$ " + tool + " " + String.join(" ", argv));
    if (in != null) System.setIn(in);
    else System.setIn(new ByteArrayInputStream(new byte[0]));
    r.thread = new Thread(() -> {
      CURRENT.set(r);
      try {
        Class.forName(main).getMethod("main", String[].class)
            .invoke(null, (Object) argv.toArray(new String[0]));
        if (r.code == null) r.code = 0;
      } catch (java.lang.reflect.InvocationTargetException e) {
        Throwable c = e.getCause();
        if (c instanceof ToolExit x) {
          if (r.code == null) r.code = x.code;
        } else {
          c.printStackTrace();
          r.code = -1;
        }
      } catch (Throwable e) {
        e.printStackTrace();
        r.code = -1;
      } finally {
        r.runHooks();
        System.out.flush();
        System.err.flush();
      }
    }, tool);
    r.thread.start();
    return r;
  }

  static ToolRun tool(InputStream in, String tool, String... args) throws InterruptedException {
    ToolRun r = start(in, tool, args);
    r.join(60_000);
    return r;
  }

  // Runs a tool that must succeed; returns its stdout.
  static String ok(String tool, String... args) throws InterruptedException {
    ToolRun r = tool(null, tool, args);
    check(r.code == 0, r.failure());
    return r.out();
  }

  // ---- results, as driverlib.Flow -------------------------------------------------------------

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
      e.printStackTrace(REAL_ERR);
      err = e.getClass().getSimpleName() + ": " + e.getMessage();
    }
    String took = String.format("%.1fs", (System.currentTimeMillis() - t) / 1000.0);
    RESULTS.add(new Result(id, title, err));
    step("step " + id + " (" + title + ") " + (err == null ? "passed in " + took
        : "FAILED after " + took + ": " + err));
    if (err != null && fatal) finish();
  }

  static void finish() {
    for (Result r : RESULTS)
      REAL_OUT.printf("RESULT %-6s %-28s %s%n", r.id, r.title,
                      r.error == null ? "PASS" : "FAIL: " + r.error.replace("\n", "\n    "));
    List<String> bad = RESULTS.stream().filter(r -> r.error != null).map(r -> r.id).toList();
    if (!bad.isEmpty()) throw new DriverError("steps failed: " + String.join(", ", bad));
  }

  // ---- records ----------------------------------------------------------------------------

  // headers: [key, value] pairs; the console tools print them as k:v,k:v (NO_HEADERS if none).
  record Rec(int partition, String key, String value, List<String[]> headers, String codec) {
    String line() {
      String h = headers.isEmpty() ? "NULL"
          : headers.stream().map(x -> x[0] + ":" + x[1]).collect(Collectors.joining(","));
      return h + "\t" + key + "\t" + value;
    }

    String printedHeaders() {
      return headers.isEmpty() ? "NO_HEADERS"
          : headers.stream().map(x -> x[0] + ":" + x[1]).collect(Collectors.joining(","));
    }
  }

  // A consumed record as the console consumer prints it.
  record Got(long timestamp, int partition, long offset, String headers, String key,
             String value) {}

  static final String FILLER = "samsa-kafka-compatible-log-broker;".repeat(8);

  static int partitionFor(String key, int partitions) {
    return Utils.toPositive(Utils.murmur2(key.getBytes(StandardCharsets.UTF_8))) % partitions;
  }

  // The shapes of driverlib.make_records, in text: values start with "<codec>|" for the
  // segment check, carry multi-byte UTF-8, and compress well.
  static List<Rec> makeRecords(String codec, String prefix, int count) {
    List<Rec> out = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      String key = "key-" + codec + "-" + i + "-\u00e9";
      String value = String.format("%s|%s|%04d|", codec, prefix, i) + FILLER
          + FILLER.substring(0, (i * 37) % FILLER.length()) + "\u00fc\u2603";
      List<String[]> h = switch (i % 4) {
        case 0 -> List.of();
        case 1 -> List.<String[]>of(new String[] {"h1", "v1"}, new String[] {"utf", "\u00fc\u2603"});
        case 2 -> List.<String[]>of(new String[] {"dup", "a"}, new String[] {"dup", "b"},
                          new String[] {"empty", ""});
        default -> List.<String[]>of(new String[] {"codec", codec});
      };
      out.add(new Rec(partitionFor(key, PARTITIONS), key, value, h, codec));
    }
    return out;
  }

  static final Pattern PRINTED = Pattern.compile(
      "(?:CreateTime|LogAppendTime):(-?\\d+)\\tPartition:(\\d+)\\tOffset:(\\d+)\\t([^\\t]*)\\t([^\\t]*)\\t(.*)");

  static List<Got> parseConsumed(String out) {
    List<Got> got = new ArrayList<>();
    for (String line : out.split("\n")) {
      if (line.isEmpty() || line.startsWith("Processed a total of")) continue;
      Matcher m = PRINTED.matcher(line);
      check(m.matches(), "console consumer printed an unexpected line: " + abbreviate(line));
      got.add(new Got(Long.parseLong(m.group(1)), Integer.parseInt(m.group(2)),
                      Long.parseLong(m.group(3)), m.group(4), m.group(5), m.group(6)));
    }
    return got;
  }

  static void checkRecord(int p, long offset, Rec w, Got g, String what) {
    String where = "partition " + p + " offset " + g.offset + " (" + what + ", codec " + w.codec
        + ")";
    check(g.partition == p, where + ": from partition " + g.partition);
    check(g.offset == offset, where + ": expected offset " + offset);
    check(g.key.equals(w.key), where + ": key " + g.key + " != produced " + w.key);
    check(g.value.equals(w.value), where + ": value differs from the produced one");
    check(g.headers.equals(w.printedHeaders()), where + ": headers " + g.headers
        + " != produced " + w.printedHeaders());
  }

  static void comparePartition(int p, List<Rec> want, List<Got> got, String what, long first) {
    check(got.size() == want.size(), "partition " + p + ": " + what + " " + got.size()
        + " records from offset " + first + ", produced " + want.size());
    for (int i = 0; i < want.size(); i++)
      checkRecord(p, first + i, want.get(i), got.get(i), what + " #" + i);
  }

  static final String[] PRINT = {"--property", "print.timestamp=true", "--property",
      "print.partition=true", "--property", "print.offset=true", "--property",
      "print.headers=true", "--property", "print.key=true"};

  static String[] concat(String[] a, String... b) {
    String[] out = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  // kafka-console-consumer on one partition from `offset`, `n` records.
  static List<Got> consumePartition(String topic, int p, String offset, int n)
      throws InterruptedException {
    String out = ok("kafka-console-consumer", concat(new String[] {"--topic", topic,
        "--partition", String.valueOf(p), "--offset", offset, "--max-messages",
        String.valueOf(n), "--timeout-ms", "15000"}, PRINT));
    return parseConsumed(out);
  }

  static void produce(String topic, List<Rec> recs, String codec, boolean sync, InputStream in)
      throws InterruptedException {
    List<String> args = new ArrayList<>(List.of("--topic", topic, "--compression-codec", codec,
        "--request-required-acks", "all", "--property", "parse.key=true", "--property",
        "parse.headers=true", "--property", "null.marker=NULL", "--producer-property",
        "linger.ms=50"));
    if (sync) args.add("--sync");
    if (in == null) {
      String lines = recs.stream().map(Rec::line).collect(Collectors.joining("\n")) + "\n";
      in = new ByteArrayInputStream(lines.getBytes(StandardCharsets.UTF_8));
    }
    ToolRun r = tool(in, "kafka-console-producer", args.toArray(new String[0]));
    // Without --sync a refused batch is only logged ("Error when sending message ...").
    check(r.code == 0 && !r.err().contains("Error when sending") && !r.err().contains("Exception"),
          r.failure());
  }

  // kafka-get-offsets --time T: partition -> offset.
  static Map<Integer, Long> offsets(String topic, String time, String partitions)
      throws InterruptedException {
    List<String> args = new ArrayList<>(List.of("--topic", topic, "--time", time));
    if (partitions != null) args.addAll(List.of("--partitions", partitions));
    String out = ok("kafka-get-offsets", args.toArray(new String[0]));
    Map<Integer, Long> m = new TreeMap<>();
    for (String line : out.strip().split("\n")) {
      if (line.isBlank()) continue;
      String[] f = line.split(":");
      check(f.length >= 3 && f[0].equals(topic), "kafka-get-offsets printed " + line);
      m.put(Integer.parseInt(f[f.length - 2]), f[f.length - 1].isEmpty() ? -1
            : Long.parseLong(f[f.length - 1]));
    }
    return m;
  }

  // A whitespace table as kafka-consumer-groups prints it: one map per row, by column header.
  static List<Map<String, String>> table(String out) {
    List<Map<String, String>> rows = new ArrayList<>();
    String[] header = null;
    for (String line : out.split("\n")) {
      String[] f = line.strip().split("\\s+");
      if (line.isBlank()) continue;
      if (f[0].equals("GROUP")) {
        header = f;
        continue;
      }
      if (header == null || f.length != header.length) continue;
      Map<String, String> row = new LinkedHashMap<>();
      for (int i = 0; i < f.length; i++) row.put(header[i], f[i]);
      rows.add(row);
    }
    return rows;
  }

  // kafka-configs --describe --all: key -> the line describing it.
  static Map<String, String> configs(String topic) throws InterruptedException {
    String out = ok("kafka-configs", "--describe", "--all", "--entity-type", "topics",
                    "--entity-name", topic);
    Map<String, String> m = new HashMap<>();
    for (String line : out.split("\n")) {
      String s = line.strip();
      int eq = s.indexOf('=');
      if (eq > 0 && !s.startsWith("All configs")) m.put(s.substring(0, eq), s);
    }
    return m;
  }

  static void awaitConfig(String topic, String key, String value) throws Exception {
    long deadline = System.currentTimeMillis() + 10_000;
    String want = key + "=" + value + " ";
    while (true) {
      String line = configs(topic).get(key);
      if (line != null && line.startsWith(want)) {
        check(line.contains("DYNAMIC_TOPIC_CONFIG:" + key + "=" + value), topic
            + ": kafka-configs shows no dynamic topic synonym: " + line);
        step("kafka-configs --describe --all: " + line);
        return;
      }
      check(System.currentTimeMillis() < deadline, topic + ": kafka-configs shows " + line
          + " 10s after setting " + key + "=" + value);
      Thread.sleep(100);
    }
  }

  static long logDirSize(String topic, int p) throws InterruptedException {
    String out = ok("kafka-log-dirs", "--describe", "--topic-list", topic);
    // The JSON line: {"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"T-0",
    // "size":123,...}],...}]}]}
    Matcher m = Pattern.compile("\\{\"partition\":\"" + Pattern.quote(topic + "-" + p)
        + "\",\"size\":(\\d+)").matcher(out);
    check(m.find(), "kafka-log-dirs shows no " + topic + "-" + p + ": " + abbreviate(out));
    return Long.parseLong(m.group(1));
  }

  static void awaitGroupState(String group, String state) throws Exception {
    long deadline = System.currentTimeMillis() + 15_000;
    while (true) {
      List<Map<String, String>> rows = table(ok("kafka-consumer-groups", "--describe",
          "--group", group, "--state"));
      String have = rows.isEmpty() ? "(none)" : rows.get(0).get("STATE");
      if (have.equalsIgnoreCase(state)) return;
      check(System.currentTimeMillis() < deadline, "group " + group + " is " + have
          + " after 15s, want " + state);
      Thread.sleep(200);
    }
  }

  // ---- the flow -----------------------------------------------------------------------------

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new HashMap<>(Map.of("--timeout", "60", "--codecs",
        String.join(",", ALL_CODECS)));
    boolean small = false;
    for (int i = 0; i < argv.length; i++) {
      if (argv[i].equals("--small")) small = true;
      else if (argv[i].equals("--full")) continue;
      else if (argv[i].startsWith("--") && i + 1 < argv.length) a.put(argv[i], argv[++i]);
      else {
        REAL_ERR.println(NAME + ": unexpected argument " + argv[i]);
        System.exit(2);
      }
    }
    for (String k : List.of("--bootstrap", "--topic-prefix", "--log-dir")) {
      if (!a.containsKey(k)) {
        REAL_ERR.println(NAME + ": " + k + " is required");
        System.exit(2);
      }
    }
    long timeout = (long) (Double.parseDouble(a.get("--timeout")) * 1000);
    Thread watchdog = new Thread(() -> {
      try {
        Thread.sleep(timeout);
      } catch (InterruptedException e) {
        return;
      }
      REAL_ERR.println(NAME + ": FAIL: hard timeout of " + timeout / 1000 + "s reached");
      Runtime.getRuntime().halt(3);
    }, "driver-watchdog");
    watchdog.setDaemon(true);
    watchdog.start();
    installExitHooks();
    try {
      run(a, small);
    } catch (DriverError e) {
      REAL_ERR.println(NAME + ": FAIL: " + e.getMessage());
      Runtime.getRuntime().halt(1);
    } catch (Throwable e) {
      e.printStackTrace(REAL_ERR);
      REAL_ERR.println(NAME + ": FAIL: unexpected exception");
      Runtime.getRuntime().halt(1);
    }
    step("PASS");
    Runtime.getRuntime().halt(0);
  }

  static void run(Map<String, String> a, boolean small) throws Exception {
    bootstrap = a.get("--bootstrap");
    String prefix = a.get("--topic-prefix");
    String topic = prefix + "-cli";
    String ret = topic + RET_SUFFIX;
    step("Apache Kafka tools " + org.apache.kafka.common.utils.AppInfoParser.getVersion()
        + " (main classes run in this JVM), java " + System.getProperty("java.version")
        + ", broker " + bootstrap);
    List<Rec> produced = new ArrayList<>();
    Map<Integer, List<Rec>> perPart = new TreeMap<>();
    Map<Integer, List<Got>> consumed = new TreeMap<>();
    long[] start0 = {0};

    flow("1", "create topic", true, () -> {
      ok("kafka-topics", "--create", "--topic", topic, "--partitions", String.valueOf(PARTITIONS),
         "--replication-factor", "1");
      List<String> names = List.of(ok("kafka-topics", "--list").strip().split("\n"));
      check(names.contains(topic), "kafka-topics --list does not show " + topic + ": " + names);
      Map<Integer, Long> ends = offsets(topic, "-1", null);
      check(ends.size() == PARTITIONS, "kafka-get-offsets lists partitions " + ends.keySet());
      step("created " + topic + "; --list shows it, kafka-get-offsets lists " + PARTITIONS
          + " partitions");
    });

    // A step of its own: --describe also asks DescribeConfigs, which the rest does not need.
    flow("1b", "kafka-topics --describe", false, () -> {
      String d = ok("kafka-topics", "--describe", "--topic", topic);
      check(d.contains("PartitionCount: " + PARTITIONS), "kafka-topics --describe: " + d);
      step("kafka-topics --describe shows PartitionCount: " + PARTITIONS);
    });

    flow("2", "produce every codec", true, () -> {
      int count = small ? 3 : 30;
      for (String codec : a.get("--codecs").split(",")) {
        List<Rec> recs = makeRecords(codec, prefix, count);
        produce(topic, recs, codec, false, null);
        produced.addAll(recs);
        step("kafka-console-producer: " + recs.size() + " keyed records with headers, "
            + "--compression-codec " + codec + ", acks=all");
      }
      for (int p = 0; p < PARTITIONS; p++) perPart.put(p, new ArrayList<>());
      for (Rec r : produced) perPart.get(r.partition).add(r);
      checkSegments(a.get("--log-dir"), topic, produced);
    });

    flow("3", "consume byte-identical", false, () -> {
      Map<Integer, Long> lo = offsets(topic, "-2", null), hi = offsets(topic, "-1", null);
      for (int p = 0; p < PARTITIONS; p++)
        check(lo.get(p) == 0 && hi.get(p) == perPart.get(p).size(), "partition " + p
            + ": kafka-get-offsets earliest/latest " + lo.get(p) + "/" + hi.get(p)
            + ", expected 0/" + perPart.get(p).size());
      step("kafka-get-offsets --time -2/-1 match the produced counts (each key's partition "
          + "by murmur2)");
      for (int p = 0; p < PARTITIONS; p++) {
        List<Got> got = consumePartition(topic, p, "earliest", perPart.get(p).size());
        comparePartition(p, perPart.get(p), got, "consumed", 0);
        consumed.put(p, got);
      }
      step("kafka-console-consumer read all " + produced.size()
          + " records back identical (key, value, headers), in order per partition");
    });

    flow("4a", "seek to an offset", false, () -> {
      int p = 2, off = perPart.get(p).size() / 3;
      List<Got> got = consumePartition(topic, p, String.valueOf(off), 1);
      check(got.size() == 1, "no record at partition " + p + " offset " + off);
      checkRecord(p, off, perPart.get(p).get(off), got.get(0), "after --offset " + off);
      step("kafka-console-consumer --partition " + p + " --offset " + off
          + ": the right record");
    });

    flow("4b", "seek to a timestamp", false, () -> {
      int p = 1;
      List<Got> got = consumed.get(p);
      check(got != null, "step 3 printed no timestamps");
      // The first record of a later producer run: every record before it is older.
      int idx = -1;
      String third = a.get("--codecs").split(",")[Math.min(2, a.get("--codecs").split(",").length - 1)];
      for (int i = 0; i < got.size(); i++)
        if (perPart.get(p).get(i).codec.equals(third)) {
          idx = i;
          break;
        }
      check(idx > 0, "partition " + p + " has no record of the third producer run");
      long ts = got.get(idx).timestamp;
      check(got.get(idx - 1).timestamp < ts, "records " + (idx - 1) + " and " + idx
          + " share timestamp " + ts);
      Map<Integer, Long> o = offsets(topic, String.valueOf(ts), String.valueOf(p));
      check(o.get(p) == idx, "kafka-get-offsets --time " + ts + " gave " + o.get(p)
          + ", expected " + idx);
      List<Got> first = consumePartition(topic, p, String.valueOf(idx), 1);
      checkRecord(p, idx, perPart.get(p).get(idx), first.get(0), "after seek to time " + ts);
      step("kafka-get-offsets --time " + ts + " -> offset " + idx
          + "; kafka-console-consumer --offset there reads that record");
    });

    flow("5a", "retention.ms shrinks the log", false, () -> {
      ok("kafka-topics", "--create", "--topic", ret, "--partitions", "1",
         "--replication-factor", "1", "--config", "segment.ms=" + SEGMENT_MS);
      List<Rec> recs = new ArrayList<>();
      for (int i = 0; i < RET_RECORDS; i++)
        recs.add(new Rec(0, "ret-" + i, "none|" + prefix + "|ret|" + i + "|" + FILLER,
                         List.<String[]>of(new String[] {"r", String.valueOf(i)}), "none"));
      // --sync: one batch per record; the pause between lines gives each batch a CreateTime
      // past segment.ms, so each starts a segment of its own.
      produce(ret, recs, "none", true, new SlowLines(recs.stream().map(Rec::line).toList(),
                                                      SEGMENT_MS + 50));
      check(offsets(ret, "-2", null).get(0) == 0, ret + ": earliest is not 0");
      // kafka-log-dirs is checked last, so that a broker without DescribeLogDirs still shows
      // whether retention itself works.
      long before = -1;
      String logDirsError = null;
      try {
        before = logDirSize(ret, 0);
      } catch (DriverError e) {
        logDirsError = e.getMessage();
      }
      step(ret + ": " + RET_RECORDS + " records, " + (SEGMENT_MS + 50) + " ms apart, "
          + "segment.ms=" + SEGMENT_MS + "; kafka-log-dirs: " + before + " bytes");
      ok("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", ret,
         "--add-config", "retention.ms=" + RETENTION_MS);
      awaitConfig(ret, "retention.ms", String.valueOf(RETENTION_MS));
      long deadline = System.currentTimeMillis() + 20_000;
      long start;
      while ((start = offsets(ret, "-2", null).get(0)) == 0) {
        check(System.currentTimeMillis() < deadline, ret + "'s log start did not move within "
            + "20s of retention.ms=" + RETENTION_MS);
        Thread.sleep(300);
      }
      check(logDirsError == null, "retention moved the log start to " + start
          + ", but " + logDirsError);
      long after = logDirSize(ret, 0);
      check(after < before, "kafka-log-dirs: " + ret + "-0 is " + after + " bytes after "
          + "retention, " + before + " before");
      step("retention deleted old segments: " + ret + "-0 starts at offset " + start
          + ", kafka-log-dirs: " + after + " bytes");
    });

    flow("5b", "max.message.bytes refuses", false, () -> {
      ok("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", ret,
         "--add-config", "max.message.bytes=" + MAX_MESSAGE_BYTES);
      awaitConfig(ret, "max.message.bytes", String.valueOf(MAX_MESSAGE_BYTES));
      long end = offsets(ret, "-1", null).get(0);
      StringBuilder big = new StringBuilder();
      java.util.Random rnd = new java.util.Random();
      while (big.length() < BIG_VALUE_BYTES) big.append((char) ('!' + rnd.nextInt(90)));
      Rec r = new Rec(0, "big", big.toString(), List.of(), "none");
      List<String> args = List.of("--topic", ret, "--compression-codec", "none",
          "--request-required-acks", "all", "--property", "parse.key=true", "--sync");
      ToolRun run = tool(new ByteArrayInputStream((r.key + "\t" + r.value + "\n")
          .getBytes(StandardCharsets.UTF_8)), "kafka-console-producer",
          args.toArray(new String[0]));
      check(run.code != 0, "a " + BIG_VALUE_BYTES + "-byte record was accepted with "
          + "max.message.bytes=" + MAX_MESSAGE_BYTES + ":\n" + run.describe());
      check(run.err().contains("RecordTooLargeException"), "the large record failed, but not "
          + "with RecordTooLargeException:\n" + run.describe());
      long after = offsets(ret, "-1", null).get(0);
      check(after == end, ret + ": end offset moved from " + end + " to " + after);
      step("kafka-console-producer --sync exits " + run.code + " with RecordTooLargeException");
    });

    Map<Integer, List<Rec>> parts = new TreeMap<>(perPart);
    int np = NEW_PARTITIONS - 1;
    flow("6", "add partitions", false, () -> {
      ok("kafka-topics", "--alter", "--topic", topic, "--partitions",
         String.valueOf(NEW_PARTITIONS));
      long deadline = System.currentTimeMillis() + 15_000;
      while (offsets(topic, "-1", null).size() != NEW_PARTITIONS) {
        check(System.currentTimeMillis() < deadline, "kafka-get-offsets does not list "
            + NEW_PARTITIONS + " partitions 15s after kafka-topics --alter");
        Thread.sleep(200);
      }
      // Keys the default partitioner sends to the new partition.
      List<Rec> recs = new ArrayList<>();
      for (int k = 0; recs.size() < NEW_RECORDS; k++) {
        String key = "new-" + k + "-\u00e9";
        if (partitionFor(key, NEW_PARTITIONS) != np) continue;
        int i = recs.size();
        recs.add(new Rec(np, key, "none|" + prefix + "|new|" + i + "|" + FILLER + "\u2603",
            List.<String[]>of(new String[] {"new", String.valueOf(i)}, new String[] {"utf", "\u00e9"}),
            "lz4"));
      }
      produce(topic, recs, "lz4", false, null);
      comparePartition(np, recs, consumePartition(topic, np, "earliest", NEW_RECORDS),
                       "consumed", 0);
      parts.put(np, recs);
      step("kafka-topics --alter --partitions " + NEW_PARTITIONS + "; produced " + NEW_RECORDS
          + " records with keys that hash to partition " + np + " and read them back");
    });

    flow("7", "delete records", false, () -> {
      int cut = perPart.get(0).size() / 2;
      Path json = Files.createTempFile("cli-delete-records-", ".json");
      try {
        Files.writeString(json, "{\"partitions\":[{\"topic\":\"" + topic
            + "\",\"partition\":0,\"offset\":" + cut + "}],\"version\":1}");
        String out = ok("kafka-delete-records", "--offset-json-file", json.toString());
        String line = Arrays.stream(out.split("\n")).filter(l -> l.contains(topic + "-0"))
            .findFirst().orElse("(no line for " + topic + "-0)");
        check(line.equals("partition: " + topic + "-0\tlow_watermark: " + cut),
              "kafka-delete-records printed " + line.strip() + "\n" + out);
      } finally {
        Files.deleteIfExists(json);
      }
      check(offsets(topic, "-2", "0").get(0) == cut, topic + "-0: kafka-get-offsets --time -2 "
          + "is not " + cut + " after kafka-delete-records");
      List<Got> got = consumePartition(topic, 0, "earliest", 1);
      checkRecord(0, cut, perPart.get(0).get(cut), got.get(0), "--offset earliest after "
          + "kafka-delete-records");
      start0[0] = cut;
      step("kafka-delete-records " + topic + "-0 before " + cut + ": low watermark " + cut
          + ", --offset earliest reads from there");
    });

    String group = prefix + "-cli-group";
    flow("8a", "describe group, lag", false, () -> {
      // The tools commit offsets only for an inactive group: place them at end-LAG first, then
      // let a console consumer (auto commit off) join and read the last LAG records of each
      // partition, and describe the group while it is a member.
      String out = ok("kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic",
                      topic, "--to-latest", "--execute");
      out = ok("kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic", topic,
               "--shift-by", String.valueOf(-LAG), "--execute");
      Map<Integer, Long> ends = offsets(topic, "-1", null);
      int n = parts.size();
      int want = 0;
      for (int p = 0; p < n; p++) want += Math.min(LAG, ends.get(p));
      ToolRun c = start(null, "kafka-console-consumer", concat(new String[] {"--topic", topic,
          "--group", group, "--consumer-property", "enable.auto.commit=false",
          "--max-messages", String.valueOf(want + 1), "--timeout-ms", "30000"}, PRINT));
      try {
        long deadline = System.currentTimeMillis() + 30_000;
        while (c.out().split("\n").length < want || c.out().isEmpty()) {
          check(c.thread.isAlive(), "kafka-console-consumer ended early:\n" + c.describe());
          check(System.currentTimeMillis() < deadline, "the group's console consumer read "
              + "less than " + want + " records in 30s:\n" + c.describe());
          Thread.sleep(100);
        }
        List<Map<String, String>> rows = table(ok("kafka-consumer-groups", "--describe",
                                                  "--group", group));
        check(rows.size() == n, "kafka-consumer-groups --describe shows " + rows.size()
            + " partitions, want " + n + ": " + rows);
        String member = null;
        for (Map<String, String> row : rows) {
          int p = Integer.parseInt(row.get("PARTITION"));
          long end = ends.get(p);
          check(row.get("CURRENT-OFFSET").equals(String.valueOf(end - LAG))
                    && row.get("LOG-END-OFFSET").equals(String.valueOf(end))
                    && row.get("LAG").equals(String.valueOf(LAG)),
                "kafka-consumer-groups --describe, partition " + p + ": " + row);
          check(!row.get("CONSUMER-ID").equals("-"), "partition " + p + " has no member: "
              + row);
          member = row.get("CONSUMER-ID");
        }
        List<Map<String, String>> members = table(ok("kafka-consumer-groups", "--describe",
            "--group", group, "--members"));
        check(members.size() == 1 && members.get(0).get("#PARTITIONS").equals(String.valueOf(n)),
              "kafka-consumer-groups --describe --members: " + members);
        List<Map<String, String>> state = table(ok("kafka-consumer-groups", "--describe",
            "--group", group, "--state"));
        check(state.size() == 1 && state.get(0).get("STATE").equalsIgnoreCase("Stable")
                  && state.get(0).get("#MEMBERS").equals("1"),
              "kafka-consumer-groups --describe --state: " + state);
        step("kafka-consumer-groups --describe: CURRENT-OFFSET end-" + LAG + ", LAG " + LAG
            + " on " + n + " partitions, member " + member + "; --members: 1 member with "
            + n + " partitions; --state: Stable");
      } finally {
        c.runHooks(); // Ctrl-C
        c.join(30_000);
      }
      check(c.code == 0, "the group's console consumer failed:\n" + c.describe());
      Map<Integer, List<Got>> got = new TreeMap<>();
      for (Got g : parseConsumed(c.out())) got.computeIfAbsent(g.partition, k -> new ArrayList<>()).add(g);
      for (int p = 0; p < n; p++) {
        int size = parts.get(p).size();
        int from = Math.max(size - LAG, 0);
        comparePartition(p, parts.get(p).subList(from, size), got.getOrDefault(p, List.of()),
                         "group-consumed", from);
      }
      step("the group's console consumer read the last " + LAG + " records of each partition");
    });

    flow("8b", "reset group offsets", false, () -> {
      awaitGroupState(group, "Empty");
      String dry = ok("kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic",
                      topic, "--to-earliest", "--dry-run");
      List<Map<String, String>> rows = table(dry);
      for (Map<String, String> row : rows) {
        int p = Integer.parseInt(row.get("PARTITION"));
        check(row.get("NEW-OFFSET").equals(String.valueOf(p == 0 ? start0[0] : 0)),
              "--reset-offsets --to-earliest --dry-run, partition " + p + ": " + row);
      }
      Map<Integer, Integer> reset = new TreeMap<>();
      for (int p : parts.keySet()) reset.put(p, p == 0 ? (int) start0[0] + 1 : 1 + p % 2);
      Path csv = Files.createTempFile("cli-reset-", ".csv");
      try {
        Files.writeString(csv, reset.entrySet().stream()
            .map(e -> topic + "," + e.getKey() + "," + e.getValue())
            .collect(Collectors.joining("\n")) + "\n");
        ok("kafka-consumer-groups", "--reset-offsets", "--group", group, "--from-file",
           csv.toString(), "--execute");
      } finally {
        Files.deleteIfExists(csv);
      }
      rows = table(ok("kafka-consumer-groups", "--describe", "--group", group));
      for (Map<String, String> row : rows) {
        int p = Integer.parseInt(row.get("PARTITION"));
        check(row.get("CURRENT-OFFSET").equals(String.valueOf(reset.get(p))),
              "after --reset-offsets --from-file, partition " + p + ": " + row);
      }
      int want = 0;
      for (int p : parts.keySet()) want += parts.get(p).size() - reset.get(p);
      String out = ok("kafka-console-consumer", concat(new String[] {"--topic", topic,
          "--group", group, "--max-messages", String.valueOf(want), "--timeout-ms", "20000"},
          PRINT));
      Map<Integer, List<Got>> got = new TreeMap<>();
      for (Got g : parseConsumed(out)) got.computeIfAbsent(g.partition, k -> new ArrayList<>()).add(g);
      for (int p : parts.keySet()) {
        List<Rec> l = parts.get(p);
        comparePartition(p, l.subList(reset.get(p), l.size()), got.getOrDefault(p, List.of()),
                         "consumed after reset", reset.get(p));
      }
      step("--reset-offsets --to-earliest --dry-run showed the log starts; --from-file set "
          + reset + "; kafka-console-consumer --group read from there, identical");
    });

    flow("9", "delete topic", false, () -> {
      ok("kafka-topics", "--delete", "--topic", topic);
      ok("kafka-topics", "--delete", "--topic", ret);
      long deadline = System.currentTimeMillis() + 15_000;
      while (true) {
        List<String> names = List.of(ok("kafka-topics", "--list").strip().split("\n"));
        if (!names.contains(topic) && !names.contains(ret)) break;
        check(System.currentTimeMillis() < deadline, "still listed 15s after delete: " + names);
        Thread.sleep(200);
      }
      step("kafka-topics --delete " + topic + ", " + ret + "; --list no longer shows them");
    });
    finish();
  }

  // stdin that hands out one line per `gapMs`.
  static final class SlowLines extends InputStream {
    final List<byte[]> lines = new ArrayList<>();
    final long gapMs;
    int line = 0, pos = 0;

    SlowLines(List<String> ls, long gapMs) {
      for (String l : ls) lines.add((l + "\n").getBytes(StandardCharsets.UTF_8));
      this.gapMs = gapMs;
    }

    @Override
    public int read() throws IOException {
      byte[] b = new byte[1];
      return read(b, 0, 1) < 0 ? -1 : b[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (line >= lines.size()) return -1;
      if (pos == 0 && line > 0) {
        try {
          Thread.sleep(gapMs);
        } catch (InterruptedException e) {
          throw new IOException(e);
        }
      }
      byte[] cur = lines.get(line);
      int n = Math.min(len, cur.length - pos);
      System.arraycopy(cur, pos, b, off, n);
      pos += n;
      if (pos == cur.length) {
        line++;
        pos = 0;
      }
      return n;
    }
  }

  static void checkSegments(String logDir, String topic, List<Rec> produced) throws Exception {
    Map<String, Integer> expected = new LinkedHashMap<>();
    for (Rec r : produced) expected.merge(r.codec, 1, Integer::sum);
    String json = "{\"topic\":\"" + topic + "\",\"partitions\":" + PARTITIONS + ",\"expected\":{"
        + expected.entrySet().stream().map(e -> "\"" + e.getKey() + "\":" + e.getValue())
              .collect(Collectors.joining(","))
        + "}}";
    Path spec = Files.createTempFile("cli-driver-", ".json");
    try {
      Files.writeString(spec, json);
      String script = System.getProperty("segments.py", "segments.py");
      check(new File(script).isFile(), "segments.py not found (run from tests/clients or pass "
          + "-Dsegments.py=PATH)");
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
}
