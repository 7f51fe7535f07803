// Checks samsa's encodings against Kafka's own generated message classes (kafka-clients):
// each file <Name>_v<N>[_suffix].bin in the given directory is a message body samsa encoded;
// org.apache.kafka.common.message.<Name>Data must read it whole and write the same bytes
// back. An independent oracle for the schema files and the generator: round trips inside
// samsa cannot catch a mistake made the same way on both sides.
//
// Usage: java -cp kafka-clients.jar:. KafkaOracle DIR
import java.lang.reflect.Constructor;
import java.nio.ByteBuffer;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.protocol.Readable;

public class KafkaOracle {
  public static void main(String[] args) throws Exception {
    Pattern name = Pattern.compile("([A-Za-z]+)_v(\\d+)(_[a-z]+)?\\.bin");
    List<Path> files = new ArrayList<>();
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(Paths.get(args[0]), "*.bin")) {
      for (Path p : ds) files.add(p);
    }
    files.sort(null);
    int ok = 0, bad = 0, skipped = 0;
    for (Path p : files) {
      String file = p.getFileName().toString();
      Matcher m = name.matcher(file);
      if (!m.matches()) {
        System.out.println("SKIP " + file);
        continue;
      }
      short version = Short.parseShort(m.group(2));
      byte[] bytes = Files.readAllBytes(p);
      String problem;
      try {
        Class<?> cls = Class.forName("org.apache.kafka.common.message." + m.group(1) + "Data");
        short lowest = cls.getField("LOWEST_SUPPORTED_VERSION").getShort(null);
        short highest = cls.getField("HIGHEST_SUPPORTED_VERSION").getShort(null);
        if (version < lowest || version > highest) {
          // e.g. RequestHeader v0, which Kafka 4 no longer reads.
          System.out.println("SKIP " + file + ": this Kafka reads v" + lowest + "-" + highest);
          ++skipped;
          continue;
        }
        Constructor<?> ctor = cls.getConstructor(Readable.class, short.class);
        ByteBuffer in = ByteBuffer.wrap(bytes);
        Message msg = (Message) ctor.newInstance(new ByteBufferAccessor(in), version);
        if (in.hasRemaining()) {
          problem = in.remaining() + " bytes left unread";
        } else {
          ByteBuffer out = MessageUtil.toByteBufferAccessor(msg, version).buffer();
          byte[] again = new byte[out.remaining()];
          out.get(again);
          if (Arrays.equals(again, bytes)) {
            problem = null;
          } else {
            int i = 0;
            while (i < again.length && i < bytes.length && again[i] == bytes[i]) ++i;
            problem = "Kafka writes it differently from byte " + i + " (" + again.length + " vs "
                + bytes.length + " bytes): " + msg;
          }
        }
      } catch (java.lang.reflect.InvocationTargetException e) {
        problem = "Kafka cannot read it: " + e.getCause();
      } catch (Exception e) {
        problem = e.toString();
      }
      if (problem == null) {
        ++ok;
      } else {
        ++bad;
        System.out.println("FAIL " + file + ": " + problem);
      }
    }
    System.out.println(ok + " identical, " + bad + " failed, " + skipped + " skipped");
    System.exit(bad == 0 && ok > 0 ? 0 : 1);
  }
}
