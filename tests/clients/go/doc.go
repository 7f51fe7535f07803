// Package clients holds the Go (franz-go) client programs the integration tests drive against
// samsad and, as an oracle, against Apache Kafka. Each program is a command under cmd/.
package clients
