module samsa.test/clients

go 1.24.0

require (
	github.com/twmb/franz-go v1.20.5
	github.com/twmb/franz-go/pkg/kadm v1.17.1
	github.com/twmb/franz-go/pkg/kmsg v1.12.0
)

require (
	github.com/klauspost/compress v1.18.1 // indirect
	github.com/pierrec/lz4/v4 v4.1.22 // indirect
	golang.org/x/crypto v0.45.0 // indirect
)
