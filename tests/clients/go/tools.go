//go:build tools

// Pins the franz-go modules in go.mod/go.sum before any command imports them.
package clients

import (
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kgo"
)
