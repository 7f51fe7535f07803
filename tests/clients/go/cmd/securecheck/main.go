// Command securecheck checks a broker's SASL_SSL listener with franz-go (kgo): TLS verified
// against the given CA, then SASL PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. In the normal mode it
// creates the topic (1 partition; an existing topic is fine), produces --count records with
// acks=all whose values are "<topic>-<i>", consumes the partition from the beginning and checks
// the records come back exactly and in order. With --expect-auth-failure it only tries to talk
// to the broker with the given (wrong) credentials and passes if franz-go reports a SASL
// authentication failure. It prints one line per step, then PASS (exit 0) or FAIL: <why>
// (exit 1); usage errors exit 2. Everything is bounded: 60 s in the normal mode, 30 s with
// --expect-auth-failure or --expect-denied.
//
// With --expect-denied (tests/integration/acl_test.py) the user is authenticated but the
// broker's ACLs deny it: producing one record to --topic must fail with
// TOPIC_AUTHORIZATION_FAILED, and a consumer in --group subscribed to --group-topic (a topic the
// user may read) must be refused with GROUP_AUTHORIZATION_FAILED. --plaintext talks to a
// SASL_PLAINTEXT listener (no TLS, no --ca) in any mode. --mechanism NONE talks to an SSL
// listener (TLS without SASL), with --cert/--key a client certificate (mutual TLS).
//
//	securecheck --bootstrap HOST:PORT --ca CA.pem --mechanism SCRAM-SHA-512|SCRAM-SHA-256|PLAIN
//	            --user U --password P --topic T [--count N] [--expect-auth-failure]
//	securecheck --bootstrap HOST:PORT --plaintext --mechanism PLAIN --user U --password P
//	            --topic T --expect-denied --group G --group-topic T2
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const (
	name = "securecheck"
	// Hard bounds on the whole run; the client calls use contexts 5 s shorter.
	runLimit  = 60 * time.Second
	authLimit = 30 * time.Second
)

var t0 = time.Now()

func step(format string, a ...any) {
	fmt.Printf("[%s %6.2fs] %s\n", name, time.Since(t0).Seconds(), fmt.Sprintf(format, a...))
}

func failf(format string, a ...any) {
	fmt.Printf("FAIL: %s\n", fmt.Sprintf(format, a...))
	os.Exit(1)
}

func usage(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", name, fmt.Sprintf(format, a...))
	flag.Usage()
	os.Exit(2)
}

type args struct {
	bootstrap, ca, mechanism, user, password, topic string
	count                                           int
	expectAuthFailure                               bool
	plaintext, expectDenied                         bool
	cert, key                                       string
	group, groupTopic                               string
}

func parseArgs() args {
	var a args
	flag.StringVar(&a.bootstrap, "bootstrap", "", "HOST:PORT of the SASL_SSL listener")
	flag.StringVar(&a.ca, "ca", "", "PEM file with the CA that signed the broker certificate")
	flag.StringVar(&a.mechanism, "mechanism", "", "SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN")
	flag.StringVar(&a.user, "user", "", "SASL user name")
	flag.StringVar(&a.password, "password", "", "SASL password")
	flag.StringVar(&a.topic, "topic", "", "topic to create, produce to and consume from")
	flag.IntVar(&a.count, "count", 20, "number of records")
	flag.BoolVar(&a.expectAuthFailure, "expect-auth-failure", false,
		"pass only if the broker refuses the credentials")
	flag.BoolVar(&a.plaintext, "plaintext", false, "SASL_PLAINTEXT: no TLS (--ca not needed)")
	flag.StringVar(&a.cert, "cert", "", "PEM client certificate (mutual TLS; with --key)")
	flag.StringVar(&a.key, "key", "", "PEM private key of --cert")
	flag.BoolVar(&a.expectDenied, "expect-denied", false,
		"pass only if ACLs deny producing to --topic and consuming in --group")
	flag.StringVar(&a.group, "group", "", "with --expect-denied: a consumer group the user may not use")
	flag.StringVar(&a.groupTopic, "group-topic", "",
		"with --expect-denied: a topic the user may read, subscribed to in --group")
	flag.Parse()
	if flag.NArg() > 0 {
		usage("unexpected argument %q", flag.Arg(0))
	}
	noSASL := strings.ToUpper(a.mechanism) == "NONE"
	if a.bootstrap == "" || (a.ca == "" && !a.plaintext) || a.mechanism == "" ||
		(a.user == "" && !noSASL) || a.topic == "" {
		usage("--bootstrap, --ca (unless --plaintext), --mechanism, --user (unless --mechanism NONE) and --topic are required")
	}
	if (a.cert == "") != (a.key == "") {
		usage("--cert and --key go together")
	}
	if a.expectDenied && (a.group == "" || a.groupTopic == "") {
		usage("--expect-denied needs --group and --group-topic")
	}
	if a.expectDenied && a.expectAuthFailure {
		usage("--expect-denied and --expect-auth-failure exclude each other")
	}
	if a.count < 1 {
		usage("--count must be at least 1")
	}
	return a
}

func mechanism(a args) sasl.Mechanism {
	switch strings.ToUpper(a.mechanism) {
	case "PLAIN":
		return plain.Auth{User: a.user, Pass: a.password}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: a.user, Pass: a.password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: a.user, Pass: a.password}.AsSha512Mechanism()
	}
	usage("unknown --mechanism %q (SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN)", a.mechanism)
	return nil
}

func tlsConfig(a args) *tls.Config {
	pem, err := os.ReadFile(a.ca)
	if err != nil {
		failf("read --ca: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		failf("no certificate in %s", a.ca)
	}
	host, _, err := net.SplitHostPort(a.bootstrap)
	if err != nil {
		usage("--bootstrap %q: %v", a.bootstrap, err)
	}
	// The certificate is checked against the bootstrap host (127.0.0.1 in the tests: the
	// broker certificate carries IP:127.0.0.1 and DNS:localhost).
	cfg := &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}
	if a.cert != "" {
		pair, err := tls.LoadX509KeyPair(a.cert, a.key)
		if err != nil {
			failf("load --cert/--key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

func newClient(a args, opts ...kgo.Opt) *kgo.Client {
	base := []kgo.Opt{
		kgo.SeedBrokers(a.bootstrap),
		kgo.ClientID("samsa-securecheck-go"),
		kgo.DialTimeout(5 * time.Second),
		kgo.RequestTimeoutOverhead(5 * time.Second),
		kgo.RetryTimeout(20 * time.Second),
		kgo.MetadataMinAge(100 * time.Millisecond),
	}
	if strings.ToUpper(a.mechanism) != "NONE" {
		base = append(base, kgo.SASL(mechanism(a)))
	}
	if !a.plaintext {
		base = append(base, kgo.DialTLSConfig(tlsConfig(a)))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		failf("kgo.NewClient: %v", err)
	}
	return cl
}

func expectAuthFailure(a args) {
	ctx, cancel := context.WithTimeout(context.Background(), authLimit-5*time.Second)
	defer cancel()
	cl := newClient(a, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation())
	defer cl.Close()
	step("connecting to %s over %s as %q with %s (expecting an authentication failure)",
		a.bootstrap, protocol(a), a.user, a.mechanism)
	// Ping opens a connection (TLS, then the SASL exchange) and sends a Metadata request.
	err := cl.Ping(ctx)
	if err == nil {
		step("connected and authenticated; producing one record to %s", a.topic)
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: a.topic, Value: []byte(a.topic + "-auth")}).FirstErr()
		if err == nil {
			failf("the broker accepted %q with %s: connected and produced", a.user, a.mechanism)
		} else if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			failf("the broker accepted %q with %s (authenticated), then produce failed: %v", a.user, a.mechanism, err)
		}
	}
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		step("authentication refused: %v", err)
		step("PASS")
		os.Exit(0)
	case ctx.Err() != nil:
		failf("no authentication failure within %s: %v", authLimit-5*time.Second, err)
	default:
		failf("expected a SASL authentication failure, got: %v", err)
	}
}

func protocol(a args) string {
	if a.plaintext {
		return "SASL_PLAINTEXT"
	}
	if strings.ToUpper(a.mechanism) == "NONE" {
		if a.cert != "" {
			return "SSL with a client certificate"
		}
		return "SSL"
	}
	return "SASL_SSL"
}

// expectDenied: authenticated, but the ACLs let the user neither write --topic nor use --group.
func expectDenied(a args) {
	ctx, cancel := context.WithTimeout(context.Background(), authLimit-5*time.Second)
	defer cancel()
	step("connecting to %s over %s as %q with %s (expecting ACL denials)", a.bootstrap,
		protocol(a), a.user, a.mechanism)
	cl := newClient(a, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.RecordRetries(2))
	defer cl.Close()
	pctx, pcancel := context.WithTimeout(ctx, 12*time.Second)
	err := cl.ProduceSync(pctx, &kgo.Record{Topic: a.topic, Value: []byte(a.topic + "-denied")}).FirstErr()
	pcancel()
	switch {
	case err == nil:
		failf("produced to %s: the broker did not deny WRITE", a.topic)
	case !errors.Is(err, kerr.TopicAuthorizationFailed):
		failf("produce to %s: expected TOPIC_AUTHORIZATION_FAILED, got: %v", a.topic, err)
	}
	step("produce to %s refused: %v", a.topic, err)

	cons := newClient(a, kgo.ConsumerGroup(a.group), kgo.ConsumeTopics(a.groupTopic),
		kgo.FetchMaxWait(500*time.Millisecond))
	defer cons.Close()
	step("consuming %s in group %s", a.groupTopic, a.group)
	for {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			failf("no GROUP_AUTHORIZATION_FAILED within %s", authLimit-5*time.Second)
		}
		var gerr error
		fs.EachError(func(t string, p int32, err error) {
			if gerr == nil {
				gerr = err
			}
		})
		if gerr == nil {
			if fs.NumRecords() > 0 {
				failf("consumed %d records in group %s: the broker did not deny the group",
					fs.NumRecords(), a.group)
			}
			continue
		}
		if !errors.Is(gerr, kerr.GroupAuthorizationFailed) {
			failf("consume in group %s: expected GROUP_AUTHORIZATION_FAILED, got: %v", a.group, gerr)
		}
		step("group %s refused: %v", a.group, gerr)
		step("PASS")
		return
	}
}

func normal(a args) {
	ctx, cancel := context.WithTimeout(context.Background(), runLimit-5*time.Second)
	defer cancel()
	cl := newClient(a, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()

	step("connecting to %s over %s as %q with %s", a.bootstrap, protocol(a), a.user, a.mechanism)
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	err := cl.Ping(pctx)
	pcancel()
	if err != nil {
		failf("connect: %v", err)
	}
	step("connected and authenticated")

	adm := kadm.NewClient(cl)
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	resp, err := adm.CreateTopic(cctx, 1, -1, nil, a.topic)
	ccancel()
	switch {
	case err == nil && resp.Err == nil:
		step("created topic %s (1 partition)", a.topic)
	case errors.Is(err, kerr.TopicAlreadyExists) || errors.Is(resp.Err, kerr.TopicAlreadyExists):
		step("topic %s already exists", a.topic)
	case err != nil:
		failf("create topic %s: %v", a.topic, err)
	default:
		failf("create topic %s: %v", a.topic, resp.Err)
	}

	recs := make([]*kgo.Record, a.count)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: a.topic, Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", a.topic, i))}
	}
	prctx, prcancel := context.WithTimeout(ctx, 25*time.Second)
	results := cl.ProduceSync(prctx, recs...)
	prcancel()
	if err := results.FirstErr(); err != nil {
		failf("produce %d records to %s: %v", a.count, a.topic, err)
	}
	first := recs[0].Offset
	for i, r := range recs {
		if r.Offset != first+int64(i) {
			failf("record %d was written at offset %d, expected %d", i, r.Offset, first+int64(i))
		}
	}
	step("produced %d records with acks=all at offsets %d..%d", a.count, first, first+int64(a.count)-1)

	cons := newClient(a, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		a.topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxWait(500*time.Millisecond))
	defer cons.Close()
	step("consuming %s partition 0 from the beginning", a.topic)
	var got []*kgo.Record
	skipped := 0
	for len(got) < a.count {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			failf("consume timed out: %d of %d records back", len(got), a.count)
		}
		var fetchErr error
		fs.EachError(func(t string, p int32, err error) {
			if fetchErr == nil {
				fetchErr = fmt.Errorf("fetch %s-%d: %w", t, p, err)
			}
		})
		if fetchErr != nil {
			failf("%v", fetchErr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < first {
				skipped++ // records from before this run (the topic already existed)
			} else if len(got) < a.count {
				got = append(got, r)
			}
		})
	}
	if skipped > 0 {
		step("skipped %d records from before offset %d (written before this run)", skipped, first)
	}
	for i, r := range got {
		want := fmt.Sprintf("%s-%d", a.topic, i)
		if r.Offset != first+int64(i) {
			failf("record %d: offset %d, expected %d", i, r.Offset, first+int64(i))
		}
		if r.Key != nil {
			failf("record %d (offset %d): key %q, produced a null key", i, r.Offset, r.Key)
		}
		if string(r.Value) != want {
			failf("record %d (offset %d): value %q, expected %q", i, r.Offset, r.Value, want)
		}
	}
	step("consumed %d records back, exact and in order", len(got))
	step("PASS")
}

func main() {
	a := parseArgs()
	// A hard bound in case a client call ignores its context.
	limit := runLimit
	if a.expectAuthFailure || a.expectDenied {
		limit = authLimit
	}
	time.AfterFunc(limit, func() {
		fmt.Printf("FAIL: hard timeout of %s reached\n", limit)
		os.Exit(1)
	})
	if a.expectAuthFailure {
		expectAuthFailure(a)
		return
	}
	if a.expectDenied {
		expectDenied(a)
		os.Exit(0)
	}
	normal(a)
}
