// Package chunkd is the Go client of chunkd, the content-defined chunking and
// deduplication service (proto/chunkd/v1/chunkd.proto): a small wrapper over
// the generated stubs in package chunkdpb.
//
// Chunking a stream (the package's Example; input is any io.Reader, an
// *os.File for instance):
//
//	c, err := chunkd.Dial("127.0.0.1:50051") // chunkd.WithToken, chunkd.WithTLSFiles, ...
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer c.Close()
//	it, err := c.Chunk(ctx, input, chunkd.Params{Algorithm: "fastcdc", AvgSize: 16384})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer it.Close()
//	for it.Next() {
//		ch := it.Record() // Offset, Length, Fingerprint
//		fmt.Printf("%d,%d,%x\n", ch.Offset, ch.Length, ch.Fingerprint[:8])
//	}
//	if err := it.Err(); err != nil {
//		log.Fatal(err)
//	}
//	fmt.Println(it.Summary().TotalChunks, "chunks")
//
// Errors returned by calls are gRPC status errors: status.Code(err) gives the
// code (INVALID_ARGUMENT for bad parameters, UNAUTHENTICATED without a valid
// token, PERMISSION_DENIED for a namespace the token may not use,
// RESOURCE_EXHAUSTED past a server limit, UNAVAILABLE when the server or its
// index cannot be reached) and status.Convert(err).Message() the server's
// message, unchanged; ReasonOf(err) tells a refusal apart without reading
// the message ("STREAM_LIMIT", "INDEX_FULL", ...; see ErrorInfo). A bad
// argument the client finds itself (an unknown
// name in Params, ...) is an *ArgumentError, which carries INVALID_ARGUMENT
// too. Errors reading the input are returned as they are. Params are sent
// as the caller sets them: a field the algorithm does not take is the
// server's INVALID_ARGUMENT (see Params).
//
// Dial sets a default service config (DefaultServiceConfig): round_robin
// over every address the target resolves to, so that a dns:/// target
// naming a headless Service spreads the streams over every pod, and up to 5
// attempts of GetServerInfo, FindMissing and Release on UNAVAILABLE, over
// 11 s on average. Streams are not retried by gRPC; Params.Retries replays
// them.
//
// A Chunk or Dedup stream the server ends OK counts as complete only when its
// summary's total_bytes equals the number of data bytes the client sent on
// it, after sending all of its input. Otherwise the iterator's error is
// DATA_LOSS, "server summary reports total_bytes=N but M bytes were sent" or
// "the stream ended without a summary; M bytes were sent", and Summary is the
// zero value: the records may not cover the input.
//
// Estimate (EstimatePaths for files by name) tells how a data set would
// deduplicate under up to 16 parameter sets, cut in one pass, without
// writing to any index; ParseSet reads the command-line clients' --set
// syntax, and EstimateResult's Table and JSON are what chunkd-go estimate
// prints.
//
// A Client is safe for concurrent use; an iterator is not.
package chunkd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/chunkd/chunkd/clients/go/chunkdpb"
	"github.com/chunkd/chunkd/clients/go/internal/tables"
)

// FindMissingBatch is the most fingerprints sent in one FindMissing or
// Release request; longer lists are split.
const FindMissingBatch = 10000

// Client is a connection to one chunkd server.
type Client struct {
	conn *grpc.ClientConn
	stub pb.ChunkServiceClient
}

// DefaultServiceConfig is the gRPC service config Dial gives every channel
// unless WithServiceConfig replaces it (docs/cli.md, "Channel defaults"):
// round_robin load balancing, and a retry policy for the unary calls, which
// are idempotent (Release by its request id): up to 5 attempts (gRPC's
// most) on UNAVAILABLE, the waits between them drawn from [0, 1 s], [0,
// 3 s], [0, 9 s] and [0, 9 s], so that a call outlasts a server restart
// or what is left of a Redis failover (on average 11 s, at most 22 s,
// before a server that stays down is reported). It is declared once, in
// chunkd's table (proto/chunkd/v1/tables.json), for every client.
const DefaultServiceConfig = tables.ServiceConfig

type options struct {
	tls           *tls.Config
	tlsErr        error
	token         string
	serviceConfig string
	dialOpts      []grpc.DialOption
}

// Option configures Dial.
type Option func(*options)

// WithTLS makes the channel use TLS with cfg (nil: the system's roots and the
// target's host name). Without it the channel is plaintext.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		if cfg == nil {
			cfg = &tls.Config{}
		}
		o.tls = cfg
	}
}

// TLSFiles names PEM files for WithTLSFiles. Every field is optional.
type TLSFiles struct {
	// CA holds the certificate authorities of the server; empty: system roots.
	CA string
	// Cert and Key are a client certificate and its key, for mutual TLS.
	Cert, Key string
	// ServerName overrides the name verified in the server's certificate.
	ServerName string
}

// WithTLSFiles is WithTLS with a configuration read from PEM files; a file
// that cannot be read or parsed makes Dial fail.
func WithTLSFiles(files TLSFiles) Option {
	return func(o *options) {
		cfg, err := files.Config()
		o.tls, o.tlsErr = cfg, err
	}
}

// Config builds the tls.Config the files describe.
func (f TLSFiles) Config() (*tls.Config, error) {
	cfg := &tls.Config{ServerName: f.ServerName, MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("chunkd: TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("chunkd: TLS CA: no PEM certificate in %s", f.CA)
		}
		cfg.RootCAs = pool
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, argumentError("TLSFiles", "give both a client certificate and its key, or neither")
	}
	if f.Cert != "" {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("chunkd: TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// WithToken sends "authorization: Bearer token" with every call, for servers
// started with --auth_tokens. It is sent on plaintext channels too (use TLS
// when the network is not trusted).
func WithToken(token string) Option {
	return func(o *options) { o.token = token }
}

// WithServiceConfig replaces DefaultServiceConfig with config, a gRPC
// service config in JSON ("{}": gRPC's own defaults, pick_first and no
// retries). A grpc.WithDefaultServiceConfig given to WithDialOptions
// replaces it too. A config that does not parse makes Dial fail with an
// *ArgumentError.
func WithServiceConfig(config string) Option {
	return func(o *options) { o.serviceConfig = config }
}

// WithDialOptions passes more options to grpc.NewClient, after Dial's own.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// Dial creates a client for target ("host:port" or any gRPC target). It does
// not connect: the first call does.
func Dial(target string, opts ...Option) (*Client, error) {
	o := options{serviceConfig: DefaultServiceConfig}
	for _, opt := range opts {
		opt(&o)
	}
	if o.tlsErr != nil {
		return nil, o.tlsErr
	}
	dial := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1 << 30)),
		grpc.WithDefaultServiceConfig(o.serviceConfig),
		// Reconnect sooner than gRPC's default (1 s first): otherwise every
		// retry of a unary call falls within one reconnect wait and none
		// outlasts a restarting server (docs/cli.md, "Channel defaults").
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6,
				Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 20 * time.Second,
		}),
	}
	if o.tls != nil {
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(o.tls)))
	} else {
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if o.token != "" {
		if strings.ContainsAny(o.token, " \t\r\n") {
			return nil, argumentError("WithToken", "the token must not contain whitespace")
		}
		dial = append(dial, grpc.WithPerRPCCredentials(bearer(o.token)))
	}
	// ipv4: and ipv6: lists of addresses, as chunkctl and Python take them.
	dial = append(dial, grpc.WithResolvers(ipTargetBuilder{"ipv4"}, ipTargetBuilder{"ipv6"}))
	dial = append(dial, o.dialOpts...)
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, argumentError("Dial", "%v", err)
	}
	return &Client{conn: conn, stub: pb.NewChunkServiceClient(conn)}, nil
}

// waitReady waits until the channel has a ready connection, at most limit
// (or until ctx ends): a replay then finds the server that came back
// instead of failing at once while gRPC waits to reconnect.
func (c *Client) waitReady(ctx context.Context, limit time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		state := c.conn.GetState()
		switch state {
		case connectivity.Ready, connectivity.Shutdown:
			return
		case connectivity.Idle:
			c.conn.Connect()
		}
		if !c.conn.WaitForStateChange(ctx, state) {
			return
		}
	}
}

// randomID is a random Params.StreamID or ReleaseOptions.RequestID: 32 hex
// digits.
func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// Close closes the connection; running calls fail.
func (c *Client) Close() error { return c.conn.Close() }

// Stub is the generated client, for what the wrapper does not cover.
func (c *Client) Stub() pb.ChunkServiceClient { return c.stub }

// FindMissing returns the fingerprints namespace does not have, in order.
func (c *Client) FindMissing(ctx context.Context, namespace string, fingerprints [][]byte) ([][]byte, error) {
	var missing [][]byte
	for start := 0; start == 0 || start < len(fingerprints); start += FindMissingBatch {
		end := min(start+FindMissingBatch, len(fingerprints))
		resp, err := c.stub.FindMissing(ctx, &pb.FindMissingRequest{
			Namespace: namespace, Fingerprints: fingerprints[start:end],
		})
		if err != nil {
			return nil, err
		}
		missing = append(missing, resp.GetMissingFingerprints()...)
	}
	return missing, nil
}

// ReleaseOptions are the optional fields of Client.Release.
type ReleaseOptions struct {
	// Fingerprint is the algorithm the fingerprints were made with: "sha256"
	// (also for ""), "xxh128".
	Fingerprint string
	// RequestID (1..64 characters of [A-Za-z0-9._-]) makes a retried request
	// apply once; "": a random one, so that the channel's retries on
	// UNAVAILABLE are safe. Lists longer than FindMissingBatch are sent in
	// several requests with the ids RequestID.0, RequestID.1, ... (one
	// request: RequestID).
	RequestID string
}

// Release drops one reference per fingerprint from namespace's index (an
// entry whose count reaches zero is removed) and returns, in order, the count
// left per fingerprint (0: removed or absent). The channel retries it on
// UNAVAILABLE with its request id; after another failure, or a timeout, call
// it again with the same RequestID.
func (c *Client) Release(ctx context.Context, namespace string, fingerprints [][]byte, opts ReleaseOptions) ([]uint64, error) {
	fp, ok := fingerprintNames[opts.Fingerprint]
	if !ok {
		return nil, argumentError("ReleaseOptions.Fingerprint", "unknown name %q (sha256, xxh128)", opts.Fingerprint)
	}
	if opts.RequestID == "" {
		opts.RequestID = randomID()
	}
	batches := max((len(fingerprints)+FindMissingBatch-1)/FindMissingBatch, 1)
	var counts []uint64
	for n := 0; n < batches; n++ {
		end := min((n+1)*FindMissingBatch, len(fingerprints))
		req := &pb.ReleaseRequest{Namespace: namespace, Fingerprints: fingerprints[n*FindMissingBatch : end],
			Fingerprint: fp, RequestId: opts.RequestID}
		if batches > 1 {
			req.RequestId = fmt.Sprintf("%s.%d", opts.RequestID, n)
		}
		resp, err := c.stub.Release(ctx, req)
		if err != nil {
			return nil, err
		}
		counts = append(counts, resp.GetRefCounts()...)
	}
	return counts, nil
}
