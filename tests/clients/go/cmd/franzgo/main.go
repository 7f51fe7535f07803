// Command franzgo drives a broker with franz-go (kgo) and its admin package (kadm) through the
// full flow of tests/clients/README.md: create a topic; produce keyed records with headers with
// every codec (acks=all, idempotent: franz-go's default); consume them back byte-identical;
// seek to an offset and to a timestamp; alter topic configs (retention.ms shrinks the log,
// max.message.bytes refuses a batch); add partitions; delete records; describe a group with
// its lag and reset its offsets; delete the topics. Stored segments are checked with
// tests/clients/segments.py. Each step's result is printed (RESULT lines) and the run goes on
// after a failed step; the exit status is non-zero if any step failed.
//
//	franzgo --bootstrap HOST:PORT --topic-prefix P --log-dir DIR [--timeout S] [--small]
//	        [--codecs none,gzip,...] [--full]
//
// --full is accepted for symmetry with the other drivers: this one always runs the full flow.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	name       = "franz_go"
	partitions = 3
	// The full flow's fixed figures: the same as tests/clients/driverlib.py's.
	retSuffix       = "-ret"
	segmentMs       = 100
	retRecords      = 6
	retentionMs     = 1000
	maxMessageBytes = 2048
	bigValueBytes   = 8192
	newPartitions   = 4
	newRecords      = 3
	lagWant         = 2
)

var (
	allCodecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}
	t0        = time.Now()
	filler    = []byte(strings.Repeat("samsa-kafka-compatible-log-broker;", 8))
)

type driverError struct{ msg string }

func (e driverError) Error() string { return e.msg }

func fail(format string, a ...any) { panic(driverError{fmt.Sprintf(format, a...)}) }

func check(cond bool, format string, a ...any) {
	if !cond {
		fail(format, a...)
	}
}

func must(err error, format string, a ...any) {
	if err != nil {
		fail("%s: %v", fmt.Sprintf(format, a...), err)
	}
}

func step(format string, a ...any) {
	fmt.Printf("[%s %6.2fs] %s\n", name, time.Since(t0).Seconds(), fmt.Sprintf(format, a...))
}

// flow records each step's result and goes on after a failed one (see driverlib.Flow).
type result struct{ id, title, err string }

var results []result

func run(id, title string, fatal bool, body func()) {
	start := time.Now()
	err := func() (err string) {
		defer func() {
			if r := recover(); r != nil {
				if d, ok := r.(driverError); ok {
					err = d.msg
				} else {
					err = fmt.Sprintf("panic: %v", r)
				}
			}
		}()
		body()
		return ""
	}()
	results = append(results, result{id, title, err})
	took := time.Since(start).Seconds()
	if err == "" {
		step("step %s (%s) passed in %.1fs", id, title, took)
	} else {
		step("step %s (%s) FAILED after %.1fs: %s", id, title, took, err)
		if fatal {
			finish()
		}
	}
}

func finish() {
	var bad []string
	for _, r := range results {
		status := "PASS"
		if r.err != "" {
			status = "FAIL: " + r.err
			bad = append(bad, r.id)
		}
		fmt.Printf("RESULT %-6s %-28s %s\n", r.id, r.title, status)
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "%s: FAIL: steps failed: %s\n", name, strings.Join(bad, ", "))
		os.Exit(1)
	}
	step("PASS")
	os.Exit(0)
}

type rec struct {
	partition int32
	key       []byte // nil: a null key
	value     []byte
	headers   []kgo.RecordHeader
	timestamp time.Time
	codec     string
}

// makeRecords: the same shapes as driverlib.make_records (values start with "<codec>|" for the
// segment check; the filler makes compression pay off).
func makeRecords(codec, prefix string, count int, tBase int64, start int) []rec {
	var out []rec
	for i := 0; i < count; i++ {
		g := start + i
		fill := append(append([]byte{}, filler...), filler[:(i*37)%len(filler)]...)
		var key []byte
		if i != 1 {
			key = append([]byte(fmt.Sprintf("key-%s-%d", codec, i)), 0, 255, byte(i%256))
		}
		value := append([]byte(fmt.Sprintf("%s|%s|%04d|", codec, prefix, i)), fill...)
		value = append(value, 0, byte(128+i%128))
		var h []kgo.RecordHeader
		switch i % 4 {
		case 1:
			h = []kgo.RecordHeader{{Key: "h1", Value: []byte("v1")}, {Key: "bin", Value: []byte{0, 1, 254, 255}}}
		case 2:
			h = []kgo.RecordHeader{{Key: "dup", Value: []byte("a")}, {Key: "dup", Value: []byte("b")}, {Key: "empty", Value: []byte{}}}
		case 3:
			h = []kgo.RecordHeader{{Key: "codec", Value: []byte(codec)}}
		}
		out = append(out, rec{int32(i % partitions), key, value, h, time.UnixMilli(tBase + int64(g)*10), codec})
	}
	return out
}

func checkRecord(p int32, offset int64, w rec, g *kgo.Record, what string) {
	where := fmt.Sprintf("partition %d offset %d (%s, codec %s)", p, g.Offset, what, w.codec)
	check(g.Partition == p, "%s: from partition %d", where, g.Partition)
	check(g.Offset == offset, "%s: expected offset %d", where, offset)
	check((g.Key == nil) == (w.key == nil) && bytes.Equal(g.Key, w.key), "%s: key %q != produced %q", where, g.Key, w.key)
	check(bytes.Equal(g.Value, w.value), "%s: value differs from the produced one", where)
	check(len(g.Headers) == len(w.headers), "%s: %d headers, produced %d", where, len(g.Headers), len(w.headers))
	for i := range g.Headers {
		check(g.Headers[i].Key == w.headers[i].Key && bytes.Equal(g.Headers[i].Value, w.headers[i].Value),
			"%s: header %d is %s=%q, produced %s=%q", where, i, g.Headers[i].Key, g.Headers[i].Value,
			w.headers[i].Key, w.headers[i].Value)
	}
	check(g.Timestamp.UnixMilli() == w.timestamp.UnixMilli(), "%s: timestamp %d != produced %d", where,
		g.Timestamp.UnixMilli(), w.timestamp.UnixMilli())
}

// comparePartition: want holds the records produced from offset `first` on.
func comparePartition(p int32, want []rec, got []*kgo.Record, what string, first int64) {
	check(len(got) == len(want), "partition %d: %s %d records from offset %d, produced %d", p, what, len(got), first, len(want))
	for i := range want {
		checkRecord(p, first+int64(i), want[i], got[i], fmt.Sprintf("%s #%d", what, i))
	}
}

type driver struct {
	bootstrap, prefix, logDir string
	small                     bool
	codecs                    []string
	ctx                       context.Context
	adm                       *kadm.Client
}

func (d *driver) client(opts ...kgo.Opt) *kgo.Client {
	base := []kgo.Opt{kgo.SeedBrokers(d.bootstrap), kgo.ClientID("samsa-franz-go-driver"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.MetadataMinAge(100 * time.Millisecond)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	must(err, "kgo.NewClient")
	return cl
}

func codecOpt(c string) kgo.CompressionCodec {
	switch c {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func (d *driver) produce(topic string, recs []rec, codec string, each bool) {
	cl := d.client(kgo.ProducerBatchCompression(codecOpt(codec)))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	var krs []*kgo.Record
	for _, r := range recs {
		kr := &kgo.Record{Topic: topic, Partition: r.partition, Key: r.key, Value: r.value,
			Headers: r.headers, Timestamp: r.timestamp}
		if each {
			must(cl.ProduceSync(ctx, kr).FirstErr(), "produce to %s-%d", topic, r.partition)
		} else {
			krs = append(krs, kr)
		}
	}
	if !each {
		must(cl.ProduceSync(ctx, krs...).FirstErr(), "produce %d records to %s (%s)", len(krs), topic, codec)
	}
}

// consume reads from the given start offsets until it has want[p] records of each partition.
func (d *driver) consume(cl *kgo.Client, want map[int32]int, timeout time.Duration) map[int32][]*kgo.Record {
	got := map[int32][]*kgo.Record{}
	ctx, cancel := context.WithTimeout(d.ctx, timeout)
	defer cancel()
	done := func() bool {
		for p, n := range want {
			if len(got[p]) < n {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			have := map[int32]int{}
			for p := range want {
				have[p] = len(got[p])
			}
			fail("consume timed out after %s: have %v, want %v", timeout, have, want)
		}
		fs.EachError(func(t string, p int32, err error) {
			fail("fetch %s-%d: %v", t, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if len(got[r.Partition]) < want[r.Partition] {
				got[r.Partition] = append(got[r.Partition], r)
			}
		})
	}
	return got
}

func (d *driver) assign(topic string, at map[int32]kgo.Offset) *kgo.Client {
	return d.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: at}),
		kgo.FetchMaxWait(500*time.Millisecond))
}

func (d *driver) offsets(topic string, end bool) map[int32]int64 {
	var lo kadm.ListedOffsets
	var err error
	if end {
		lo, err = d.adm.ListEndOffsets(d.ctx, topic)
	} else {
		lo, err = d.adm.ListStartOffsets(d.ctx, topic)
	}
	must(err, "ListOffsets %s", topic)
	must(lo.Error(), "ListOffsets %s", topic)
	out := map[int32]int64{}
	for p, o := range lo[topic] {
		out[p] = o.Offset
	}
	return out
}

func (d *driver) topicPartitions(topic string) int {
	td, err := d.adm.ListTopics(d.ctx, topic)
	if err != nil {
		return -1
	}
	t, ok := td[topic]
	if !ok || t.Err != nil {
		return -1
	}
	return len(t.Partitions)
}

func waitUntil(timeout time.Duration, what string, pred func() bool) {
	deadline := time.Now().Add(timeout)
	for !pred() {
		check(time.Now().Before(deadline), "timed out after %s waiting for %s", timeout, what)
		time.Sleep(200 * time.Millisecond)
	}
}

func (d *driver) checkSegments(topic string, produced []rec) {
	expected := map[string]int{}
	for _, r := range produced {
		expected[r.codec]++
	}
	spec, err := json.Marshal(map[string]any{"topic": topic, "partitions": partitions, "expected": expected})
	must(err, "json")
	f, err := os.CreateTemp("", "franzgo-expect-*.json")
	must(err, "temp file")
	defer os.Remove(f.Name())
	_, err = f.Write(spec)
	must(err, "write %s", f.Name())
	f.Close()
	exe, _ := os.Executable()
	script := "segments.py" // the harness runs drivers from tests/clients
	if _, err := os.Stat(script); err != nil {
		script = filepath.Join(filepath.Dir(exe), "..", "..", "..", "segments.py")
	}
	out, err := exec.Command("/usr/bin/python3", script, "check", d.logDir, f.Name()).CombinedOutput()
	check(err == nil, "stored segments: %s %v", strings.TrimSpace(string(out)), err)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		step("%s", l)
	}
}

func (d *driver) setConfig(topic, key, value string) {
	rs, err := d.adm.AlterTopicConfigs(d.ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: kadm.StringPtr(value)}}, topic)
	must(err, "IncrementalAlterConfigs %s %s=%s", topic, key, value)
	for _, r := range rs {
		must(r.Err, "IncrementalAlterConfigs %s %s=%s (%s)", topic, key, value, r.ErrMessage)
	}
}

func (d *driver) config(topic, key string) kadm.Config {
	rcs, err := d.adm.DescribeTopicConfigs(d.ctx, topic)
	must(err, "DescribeConfigs %s", topic)
	rc, err := rcs.On(topic, nil)
	must(err, "DescribeConfigs %s", topic)
	must(rc.Err, "DescribeConfigs %s (%s)", topic, rc.ErrMessage)
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	fail("DescribeConfigs %s: no %s", topic, key)
	return kadm.Config{}
}

// awaitConfig waits for DescribeConfigs to show a value just altered: Kafka answers an alter once
// the controller committed it, and its brokers apply the metadata record a moment later.
func (d *driver) awaitConfig(topic, key, want string) kadm.Config {
	var c kadm.Config
	deadline := time.Now().Add(10 * time.Second)
	for {
		c = d.config(topic, key)
		if c.MaybeValue() == want {
			return c
		}
		check(time.Now().Before(deadline), "%s: DescribeConfigs %s = %s 10s after it was set to %s", topic, key, c.MaybeValue(), want)
		time.Sleep(100 * time.Millisecond)
	}
}

func main() {
	bootstrap := flag.String("bootstrap", "", "HOST:PORT of the broker")
	prefix := flag.String("topic-prefix", "", "prefix for every topic and group")
	logDir := flag.String("log-dir", "", "the broker's log.dirs, to read segments")
	timeout := flag.Float64("timeout", 60, "hard limit for the whole run (s)")
	small := flag.Bool("small", false, "a few records per codec")
	codecs := flag.String("codecs", strings.Join(allCodecs, ","), "codecs to produce with")
	flag.Bool("full", true, "the full flow (always)")
	flag.Parse()
	if *bootstrap == "" || *prefix == "" || *logDir == "" {
		fmt.Fprintln(os.Stderr, "franzgo: --bootstrap, --topic-prefix and --log-dir are required")
		os.Exit(2)
	}
	time.AfterFunc(time.Duration(*timeout*float64(time.Second)), func() {
		fmt.Fprintf(os.Stderr, "%s: FAIL: hard timeout of %.0fs reached\n", name, *timeout)
		os.Exit(3)
	})
	d := &driver{bootstrap: *bootstrap, prefix: *prefix, logDir: *logDir, small: *small,
		ctx: context.Background()}
	for _, c := range strings.Split(*codecs, ",") {
		if c != "" {
			d.codecs = append(d.codecs, c)
		}
	}
	adm := d.client()
	d.adm = kadm.NewClient(adm)
	step("franz-go v1.20.5 (kadm v1.17.1), broker %s", d.bootstrap)
	d.flow()
}

func (d *driver) flow() {
	topic := d.prefix + "-franzgo"
	ret := topic + retSuffix
	var produced []rec
	perPart := map[int32][]rec{}

	run("1", "create topic", true, func() {
		r, err := d.adm.CreateTopic(d.ctx, partitions, 1, nil, topic)
		must(err, "CreateTopics %s", topic)
		must(r.Err, "CreateTopics %s (%s)", topic, r.ErrMessage)
		waitUntil(15*time.Second, "metadata for "+topic, func() bool { return d.topicPartitions(topic) == partitions })
		step("created %s with %d partitions", topic, partitions)
	})

	run("2", "produce every codec", true, func() {
		tBase := time.Now().UnixMilli() - 600_000
		count := 30
		if d.small {
			count = 3
		}
		for _, c := range d.codecs {
			recs := makeRecords(c, d.prefix, count, tBase, len(produced))
			d.produce(topic, recs, c, false)
			produced = append(produced, recs...)
			step("produced %d records with %s compression, acks=all, idempotent", len(recs), c)
		}
		for _, r := range produced {
			perPart[r.partition] = append(perPart[r.partition], r)
		}
		d.checkSegments(topic, produced)
	})
	counts := map[int32]int{}
	for p := int32(0); p < partitions; p++ {
		counts[p] = len(perPart[p])
	}

	run("3", "consume byte-identical", false, func() {
		lo, hi := d.offsets(topic, false), d.offsets(topic, true)
		for p := int32(0); p < partitions; p++ {
			check(lo[p] == 0 && hi[p] == int64(counts[p]), "partition %d: offsets (%d, %d), expected (0, %d)", p, lo[p], hi[p], counts[p])
		}
		step("ListOffsets earliest/latest match the produced counts")
		at := map[int32]kgo.Offset{}
		for p := int32(0); p < partitions; p++ {
			at[p] = kgo.NewOffset().AtStart()
		}
		cl := d.assign(topic, at)
		defer cl.Close()
		got := d.consume(cl, counts, 30*time.Second)
		for p := int32(0); p < partitions; p++ {
			comparePartition(p, perPart[p], got[p], "consumed", 0)
		}
		step("consumed all %d records back byte-identical, in order per partition", len(produced))
	})

	run("4a", "seek to an offset", false, func() {
		p := int32(2)
		off := len(perPart[p]) / 3
		cl := d.assign(topic, map[int32]kgo.Offset{p: kgo.NewOffset().At(int64(off))})
		defer cl.Close()
		first := d.consume(cl, map[int32]int{p: 1}, 15*time.Second)[p][0]
		checkRecord(p, int64(off), perPart[p][off], first, "after seek")
		step("seek to partition %d offset %d: first record is the right one", p, off)
	})

	run("4b", "seek to a timestamp", false, func() {
		p := int32(1)
		idx := len(perPart[p]) / 2
		ts := perPart[p][idx].timestamp.UnixMilli() - 3
		lo, err := d.adm.ListOffsetsAfterMilli(d.ctx, ts, topic)
		must(err, "ListOffsets after %d", ts)
		o, ok := lo.Lookup(topic, p)
		check(ok && o.Err == nil && o.Offset == int64(idx), "ListOffsets(%d) on partition %d gave %+v, expected %d", ts, p, o, idx)
		// The consumer's own seek by time: kgo resolves AfterMilli with ListOffsets itself.
		cl := d.assign(topic, map[int32]kgo.Offset{p: kgo.NewOffset().AfterMilli(ts)})
		defer cl.Close()
		first := d.consume(cl, map[int32]int{p: 1}, 15*time.Second)[p][0]
		checkRecord(p, int64(idx), perPart[p][idx], first, fmt.Sprintf("after seek to time %d", ts))
		step("ListOffsets by timestamp on partition %d -> offset %d; a consumer started at that time reads it first", p, idx)
	})

	run("5a", "retention.ms shrinks the log", false, func() {
		r, err := d.adm.CreateTopic(d.ctx, 1, 1, map[string]*string{"segment.ms": kadm.StringPtr(fmt.Sprint(segmentMs))}, ret)
		must(err, "CreateTopics %s", ret)
		must(r.Err, "CreateTopics %s with segment.ms (%s)", ret, r.ErrMessage)
		waitUntil(15*time.Second, "metadata for "+ret, func() bool { return d.topicPartitions(ret) == 1 })
		tBase := time.Now().UnixMilli() - 600_000
		var recs []rec
		for i := 0; i < retRecords; i++ {
			recs = append(recs, rec{0, []byte(fmt.Sprintf("ret-%d", i)),
				append([]byte(fmt.Sprintf("none|%s|ret|%d|", d.prefix, i)), filler...),
				[]kgo.RecordHeader{{Key: "r", Value: []byte(fmt.Sprint(i))}},
				time.UnixMilli(tBase + int64(i)*1000), "none"})
		}
		d.produce(ret, recs, "none", true)
		check(d.offsets(ret, false)[0] == 0, "%s: earliest is not 0", ret)
		step("%s: %d records in batches of their own, 1 s of record time apart, segment.ms=%d", ret, retRecords, segmentMs)
		d.setConfig(ret, "retention.ms", fmt.Sprint(retentionMs))
		c := d.awaitConfig(ret, "retention.ms", fmt.Sprint(retentionMs))
		check(c.Source.String() == "DYNAMIC_TOPIC_CONFIG", "%s: retention.ms has source %s", ret, c.Source)
		step("IncrementalAlterConfigs retention.ms=%d; DescribeConfigs shows %s (%s)", retentionMs, c.MaybeValue(), c.Source)
		var start int64
		waitUntil(20*time.Second, ret+"'s log start to move (retention)", func() bool {
			start = d.offsets(ret, false)[0]
			return start > 0
		})
		step("retention deleted old segments: %s-0 now starts at offset %d", ret, start)
	})

	run("5b", "max.message.bytes refuses", false, func() {
		// Legacy AlterConfigs replaces the topic's whole dynamic config: name all of it.
		rs, err := d.adm.AlterTopicConfigsState(d.ctx, []kadm.AlterConfig{
			{Name: "segment.ms", Value: kadm.StringPtr(fmt.Sprint(segmentMs))},
			{Name: "retention.ms", Value: kadm.StringPtr(fmt.Sprint(retentionMs))},
			{Name: "max.message.bytes", Value: kadm.StringPtr(fmt.Sprint(maxMessageBytes))},
		}, ret)
		must(err, "AlterConfigs %s", ret)
		for _, r := range rs {
			must(r.Err, "AlterConfigs %s (%s)", ret, r.ErrMessage)
		}
		for k, v := range map[string]int{"segment.ms": segmentMs, "retention.ms": retentionMs, "max.message.bytes": maxMessageBytes} {
			d.awaitConfig(ret, k, fmt.Sprint(v))
		}
		step("AlterConfigs max.message.bytes=%d (with the other two kept)", maxMessageBytes)
		end := d.offsets(ret, true)[0]
		big := make([]byte, bigValueBytes)
		_, _ = rand.Read(big)
		cl := d.client(kgo.RecordRetries(2))
		defer cl.Close()
		ctx, cancel := context.WithTimeout(d.ctx, 20*time.Second)
		defer cancel()
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: ret, Partition: 0, Key: []byte("big"), Value: big}).FirstErr()
		check(err != nil, "a %d-byte record was accepted with max.message.bytes=%d", bigValueBytes, maxMessageBytes)
		check(errors.Is(err, kerr.MessageTooLarge), "the large record failed with %v, expected MESSAGE_TOO_LARGE", err)
		after := d.offsets(ret, true)[0]
		check(after == end, "%s: end offset moved from %d to %d", ret, end, after)
		step("a %d-byte record is refused: %v", bigValueBytes, err)
	})

	parts := map[int32][]rec{}
	for p, l := range perPart {
		parts[p] = l
	}
	np := int32(newPartitions - 1)
	run("6", "add partitions", false, func() {
		rs, err := d.adm.UpdatePartitions(d.ctx, newPartitions, topic)
		must(err, "CreatePartitions %s", topic)
		for _, r := range rs {
			must(r.Err, "CreatePartitions %s (%s)", topic, r.ErrMessage)
		}
		waitUntil(15*time.Second, fmt.Sprintf("%s to show %d partitions", topic, newPartitions),
			func() bool { return d.topicPartitions(topic) == newPartitions })
		tBase := time.Now().UnixMilli() - 300_000
		var recs []rec
		for i := 0; i < newRecords; i++ {
			v := append([]byte(fmt.Sprintf("none|%s|new|%d|", d.prefix, i)), filler...)
			recs = append(recs, rec{np, append([]byte(fmt.Sprintf("new-%d", i)), 0, 255), append(v, 0, byte(200+i)),
				[]kgo.RecordHeader{{Key: "new", Value: []byte(fmt.Sprint(i))}, {Key: "bin", Value: []byte{0, 255}}},
				time.UnixMilli(tBase + int64(i)*10), "lz4"})
		}
		d.produce(topic, recs, "lz4", false)
		cl := d.assign(topic, map[int32]kgo.Offset{np: kgo.NewOffset().AtStart()})
		defer cl.Close()
		comparePartition(np, recs, d.consume(cl, map[int32]int{np: newRecords}, 20*time.Second)[np], "consumed", 0)
		parts[np] = recs
		step("CreatePartitions %s -> %d; produced %d records to partition %d and read them back", topic, newPartitions, newRecords, np)
	})

	var start0 int64
	run("7", "delete records", false, func() {
		cut := int64(len(perPart[0]) / 2)
		var offs kadm.Offsets
		offs.AddOffset(topic, 0, cut, -1)
		rs, err := d.adm.DeleteRecords(d.ctx, offs)
		must(err, "DeleteRecords %s-0 before %d", topic, cut)
		r, ok := rs.Lookup(topic, 0)
		check(ok, "DeleteRecords: no answer for %s-0", topic)
		must(r.Err, "DeleteRecords %s-0 before %d", topic, cut)
		check(r.LowWatermark == cut, "DeleteRecords answered low watermark %d, expected %d", r.LowWatermark, cut)
		check(d.offsets(topic, false)[0] == cut, "%s-0: ListOffsets earliest is not %d after DeleteRecords", topic, cut)
		cl := d.assign(topic, map[int32]kgo.Offset{0: kgo.NewOffset().AtStart()})
		defer cl.Close()
		first := d.consume(cl, map[int32]int{0: 1}, 15*time.Second)[0][0]
		checkRecord(0, cut, perPart[0][cut], first, "from the beginning after DeleteRecords")
		start0 = cut
		step("DeleteRecords %s-0 before %d: low watermark %d, consuming from the beginning starts there", topic, cut, cut)
	})

	group := d.prefix + "-franzgo-group"
	groupClient := func() *kgo.Client {
		return d.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(10*time.Second),
			kgo.HeartbeatInterval(time.Second), kgo.FetchMaxWait(500*time.Millisecond))
	}
	sortedParts := func() []int32 {
		var ps []int32
		for p := range parts {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		return ps
	}

	run("8a", "describe group, lag", false, func() {
		want := map[int32]int{}
		from := map[int32]int64{}
		for p, l := range parts {
			if p == 0 {
				from[p] = start0
			}
			want[p] = len(l) - int(from[p])
		}
		g := groupClient()
		defer g.Close()
		got := d.consume(g, want, 40*time.Second)
		for _, p := range sortedParts() {
			comparePartition(p, parts[p][from[p]:], got[p], "group-consumed", from[p])
		}
		commit := map[string]map[int32]kgo.EpochOffset{topic: {}}
		for p, l := range parts {
			commit[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: int64(len(l) - lagWant)}
		}
		var cerr error
		g.CommitOffsetsSync(d.ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			cerr = err
			if err == nil {
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if e := kerr.ErrorForCode(p.ErrorCode); e != nil && cerr == nil {
							cerr = fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, e)
						}
					}
				}
			}
		})
		must(cerr, "commit offsets for group %s", group)
		lags, err := d.adm.Lag(d.ctx, group)
		must(err, "describe group %s with lag", group)
		l, ok := lags[group]
		check(ok, "no answer for group %s", group)
		must(l.Error(), "describe group %s with lag", group)
		check(l.State == "Stable", "group %s is %s, want Stable", group, l.State)
		check(len(l.Members) == 1, "group %s: %d members, want 1", group, len(l.Members))
		m := l.Members[0]
		c, ok := m.Assigned.AsConsumer()
		check(ok, "group %s: member %s has no consumer assignment", group, m.MemberID)
		var assigned []int32
		for _, t := range c.Topics {
			if t.Topic == topic {
				assigned = append(assigned, t.Partitions...)
			}
		}
		sort.Slice(assigned, func(i, j int) bool { return assigned[i] < assigned[j] })
		check(len(assigned) == len(parts), "group %s: member %s is assigned %v, want 0..%d", group, m.MemberID, assigned, len(parts)-1)
		step("DescribeGroups: %s, member %s (%s, %s) holds partitions %v", l.State, m.MemberID, m.ClientID, m.ClientHost, assigned)
		for p, want := range commit[topic] {
			ml, ok := l.Lag.Lookup(topic, p)
			check(ok, "group %s: no lag for %s-%d", group, topic, p)
			must(ml.Err, "group %s: lag of %s-%d", group, topic, p)
			check(ml.Commit.At == want.Offset, "group %s: %s-%d committed %d, want %d", group, topic, p, ml.Commit.At, want.Offset)
			check(ml.Lag == lagWant, "group %s: %s-%d lag %d, want %d", group, topic, p, ml.Lag, lagWant)
			check(ml.Member != nil && ml.Member.MemberID == m.MemberID, "group %s: %s-%d has no member in the lag view", group, topic, p)
		}
		step("group offsets committed at end-%d; kadm.Lag shows lag %d on every partition", lagWant, lagWant)
	})

	run("8b", "reset group offsets", false, func() {
		waitUntil(15*time.Second, "group "+group+" to be empty after its member left", func() bool {
			gs, err := d.adm.DescribeGroups(d.ctx, group)
			if err != nil {
				return false
			}
			g := gs[group]
			return g.Err == nil && g.State == "Empty" && len(g.Members) == 0
		})
		reset := map[int32]int64{}
		var offs kadm.Offsets
		for p := range parts {
			reset[p] = 1 + int64(p%2)
			if p == 0 {
				reset[p] = start0 + 1
			}
			offs.AddOffset(topic, p, reset[p], -1)
		}
		rs, err := d.adm.CommitOffsets(d.ctx, group, offs)
		must(err, "reset offsets of group %s", group)
		must(rs.Error(), "reset offsets of group %s", group)
		have, err := d.adm.FetchOffsets(d.ctx, group)
		must(err, "OffsetFetch %s", group)
		for p, o := range reset {
			h, ok := have.Lookup(topic, p)
			check(ok && h.Err == nil && h.At == o, "group %s: %s-%d at %+v after reset to %d", group, topic, p, h, o)
		}
		want := map[int32]int{}
		for p, l := range parts {
			want[p] = len(l) - int(reset[p])
		}
		g := groupClient()
		defer g.Close()
		got := d.consume(g, want, 40*time.Second)
		for _, p := range sortedParts() {
			comparePartition(p, parts[p][reset[p]:], got[p], "consumed after reset", reset[p])
		}
		step("reset group offsets to %v; the group consumed from there, byte-identical", reset)
	})

	run("9", "delete topic", false, func() {
		rs, err := d.adm.DeleteTopics(d.ctx, topic, ret)
		must(err, "DeleteTopics")
		for _, r := range rs {
			must(r.Err, "DeleteTopics %s (%s)", r.Topic, r.ErrMessage)
		}
		waitUntil(15*time.Second, "the topics to disappear", func() bool {
			td, err := d.adm.ListTopics(d.ctx)
			if err != nil {
				return false
			}
			return !td.Has(topic) && !td.Has(ret)
		})
		step("deleted %s, %s", topic, ret)
	})
	finish()
}
