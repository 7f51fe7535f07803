// Command eosproduce is the franz-go producer of the "exactly once through faults" test
// (tests/integration/eos_test.py). It produces --records records to --partitions partitions of
// --topic with franz-go's defaults (idempotent, acks=all, unlimited retries); only the delivery
// timeout is set, so that a run is bounded. Record i goes to partition i % partitions and carries
// the value "<tag>|<partition>|<sequence>|<padding>", sequence counting per partition from 0, so
// the checker can tell duplicates, losses and reorders apart.
//
// Every acknowledged record is appended to --acks as a line "partition offset sequence"; a failed
// one to stderr as "FAILED partition sequence error". --rate paces the sends (records per second,
// 0 = as fast as the client takes them) so that the faults the test injects land throughout the
// run. The last line on stdout is a JSON summary; the exit status is 0 when every record was
// acknowledged.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	bootstrap := flag.String("bootstrap", "", "host:port")
	topic := flag.String("topic", "", "topic (must exist)")
	records := flag.Int("records", 200000, "records to produce")
	partitions := flag.Int("partitions", 6, "partitions of the topic")
	tag := flag.String("tag", "franz", "producer tag written into every value")
	acksPath := flag.String("acks", "", "file that receives one line per acknowledged record")
	rate := flag.Float64("rate", 0, "records per second (0: unpaced)")
	pad := flag.Int("pad", 40, "padding bytes per value")
	deliveryTimeout := flag.Duration("delivery-timeout", 60*time.Second, "record delivery timeout")
	timeout := flag.Duration("timeout", 120*time.Second, "give up (exit 2) after this long")
	logLevel := flag.String("log-level", "info", "franz-go's log level on stderr: none, error, warn, info, debug")
	flag.Parse()
	if *bootstrap == "" || *topic == "" || *acksPath == "" {
		fmt.Fprintln(os.Stderr, "usage: eosproduce --bootstrap H:P --topic T --acks FILE [...]")
		os.Exit(2)
	}

	f, err := os.Create(*acksPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(2)
	}
	var mu sync.Mutex // promises run on several goroutines (one per partition's sink)
	w := bufio.NewWriterSize(f, 1<<16)
	stopFlush := make(chan struct{})
	flushed := make(chan struct{})
	go func() { // the harness watches the file to pace its faults
		defer close(flushed)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				mu.Lock()
				w.Flush()
				mu.Unlock()
			case <-stopFlush:
				return
			}
		}
	}()

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(*bootstrap),
		kgo.DefaultProduceTopic(*topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(*deliveryTimeout),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, parseLevel(*logLevel), func() string {
			return time.Now().Format("15:04:05.000 ")
		})),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: client:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	var acked, failed atomic.Int64
	padding := strings.Repeat("x", *pad)
	start := time.Now()
	for i := 0; i < *records; i++ {
		if *rate > 0 && i%64 == 0 {
			due := time.Duration(float64(i) / *rate * float64(time.Second))
			if ahead := due - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		p := int32(i % *partitions)
		seq := i / *partitions
		r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("%s|%d|%d|%s", *tag, p, seq, padding))}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				fmt.Fprintf(os.Stderr, "FAILED %d %d %v\n", p, seq, err)
				return
			}
			acked.Add(1)
			mu.Lock()
			fmt.Fprintf(w, "%d %d %d\n", r.Partition, r.Offset, seq)
			mu.Unlock()
		})
	}
	flushErr := cl.Flush(ctx)
	cl.Close()
	close(stopFlush)
	<-flushed
	w.Flush()
	f.Close()

	summary, _ := json.Marshal(map[string]any{
		"client": "franz-go", "records": *records, "acked": acked.Load(), "failed": failed.Load(),
		"seconds": time.Since(start).Seconds(),
	})
	fmt.Println(string(summary))
	if flushErr != nil {
		fmt.Fprintln(os.Stderr, "FAIL: flush:", flushErr)
		os.Exit(2)
	}
	if acked.Load() != int64(*records) {
		os.Exit(1)
	}
}

func parseLevel(s string) kgo.LogLevel {
	switch s {
	case "none":
		return kgo.LogLevelNone
	case "error":
		return kgo.LogLevelError
	case "warn":
		return kgo.LogLevelWarn
	case "debug":
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelInfo
}
