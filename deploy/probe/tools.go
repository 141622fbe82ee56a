//go:build tools

// Package probe only pins github.com/grpc-ecosystem/grpc-health-probe (see
// go.mod); build it with
//
//	go build -o grpc_health_probe github.com/grpc-ecosystem/grpc-health-probe
package probe

import _ "github.com/grpc-ecosystem/grpc-health-probe"
