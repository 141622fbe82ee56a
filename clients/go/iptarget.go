package chunkd

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"google.golang.org/grpc/resolver"
)

// The ipv4: and ipv6: targets of gRPC's naming scheme, which grpc-go does
// not resolve by itself (only gRPC's C core does): a list of literal
// addresses, each with its own port, e.g.
// "ipv4:10.0.0.1:50051,10.0.0.2:50051" or "ipv6:[::1]:50051,[::1]:50052".
// A port left out is 443, as in the C core. With them every client of
// chunkd (chunkctl and the Python package use the C core) takes the same
// multi-address targets, balanced round_robin by the default service
// config. Dial registers them for its own channel only.

type ipTargetBuilder struct {
	scheme string // "ipv4" or "ipv6"
}

func (b ipTargetBuilder) Scheme() string { return b.scheme }

func (b ipTargetBuilder) Build(target resolver.Target, cc resolver.ClientConn,
	_ resolver.BuildOptions) (resolver.Resolver, error) {
	list := target.URL.Opaque
	if list == "" {
		// "ipv4:///10.0.0.1:50051": the form with an empty authority.
		list = strings.TrimPrefix(target.URL.Path, "/")
	}
	addresses, err := parseIPTarget(b.scheme, list)
	if err != nil {
		return nil, err
	}
	if err := cc.UpdateState(resolver.State{Addresses: addresses}); err != nil {
		return nil, err
	}
	return ipTargetResolver{}, nil
}

// parseIPTarget reads "a:port,b:port" of the scheme's family.
func parseIPTarget(scheme, list string) ([]resolver.Address, error) {
	if list == "" {
		return nil, fmt.Errorf("%s: target names no address", scheme)
	}
	var addresses []resolver.Address
	for _, item := range strings.Split(list, ",") {
		host, port, err := net.SplitHostPort(item)
		if err != nil {
			// No port: the whole item is the address, port 443.
			host, port = strings.TrimSuffix(strings.TrimPrefix(item, "["), "]"), "443"
		}
		ip := net.ParseIP(host)
		if ip == nil || (ip.To4() != nil) != (scheme == "ipv4") {
			return nil, fmt.Errorf("%s: %q is not an %s address", scheme, item, scheme)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%s: %q has no valid port (1..65535)", scheme, item)
		}
		addresses = append(addresses, resolver.Address{Addr: net.JoinHostPort(host, port)})
	}
	return addresses, nil
}

// The addresses never change: nothing to resolve again.
type ipTargetResolver struct{}

func (ipTargetResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (ipTargetResolver) Close()                                {}
