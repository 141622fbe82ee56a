package chunkd

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// pki writes a CA, a server certificate for 127.0.0.1 and a client
// certificate into dir, as PEM files ca.pem, server.pem/.key, client.pem/.key.
func pki(t *testing.T, dir string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chunkd go test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, kind string, der []byte) {
		data := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.pem", "CERTIFICATE", caDER)
	for i, name := range []string{"server", "client"} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		cert := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: "chunkd " + name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature,
		}
		if name == "server" {
			cert.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
			cert.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		} else {
			cert.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		}
		der, err := x509.CreateCertificate(rand.Reader, cert, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		write(name+".pem", "CERTIFICATE", der)
		write(name+".key", "PRIVATE KEY", keyDER)
	}
}

const (
	adminToken = "go-admin-token-0123456789"
	teamToken  = "go-team-token-0123456789"
)

func TestMutualTLSAndTokens(t *testing.T) {
	dir := t.TempDir()
	pki(t, dir)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# go test\n"+adminToken+" *\n"+teamToken+" team\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "client.pem"),
		Key: filepath.Join(dir, "client.key")}
	cfg, err := files.Config()
	if err != nil {
		t.Fatal(err)
	}
	s := startServerWith(t, grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		"--tls_cert="+filepath.Join(dir, "server.pem"), "--tls_key="+filepath.Join(dir, "server.key"),
		"--tls_client_ca="+files.CA, "--auth_tokens="+tokens)
	ctx := testContext(t)
	data := randomBytes(3, 200_000)

	admin := dial(t, s.addr, WithTLSFiles(files), WithToken(adminToken))
	it, err := admin.Chunk(ctx, bytes.NewReader(data), Params{})
	if err != nil {
		t.Fatal(err)
	}
	if _, sum, err := it.Collect(); err != nil || sum.TotalBytes != uint64(len(data)) {
		t.Fatalf("admin over mutual TLS: %+v, %v", sum, err)
	}

	// WithTLS takes a ready tls.Config too.
	viaConfig := dial(t, s.addr, WithTLS(cfg), WithToken(adminToken))
	if _, err := viaConfig.ServerInfo(ctx); err != nil {
		t.Fatalf("WithTLS: %v", err)
	}

	anonymous := dial(t, s.addr, WithTLSFiles(files))
	if _, err := anonymous.ServerInfo(ctx); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: %v", err)
	}

	team := dial(t, s.addr, WithTLSFiles(files), WithToken(teamToken))
	if _, err := team.FindMissing(ctx, "team", [][]byte{make([]byte, 32)}); err != nil {
		t.Fatalf("own namespace: %v", err)
	}
	dd, err := team.Dedup(ctx, "other", bytes.NewReader(data), Params{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := dd.Collect(); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("foreign namespace: %v", err)
	}

	// Without a client certificate the handshake fails.
	noCert := dial(t, s.addr, WithTLSFiles(TLSFiles{CA: files.CA}), WithToken(adminToken))
	if _, err := noCert.ServerInfo(ctx); status.Code(err) != codes.Unavailable {
		t.Fatalf("without a client certificate: %v", err)
	}
	// Plaintext to a TLS port neither.
	plain := dial(t, s.addr, WithToken(adminToken))
	if _, err := plain.ServerInfo(ctx); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext: %v", err)
	}
}

func TestTLSFilesErrors(t *testing.T) {
	if _, err := Dial("127.0.0.1:1", WithTLSFiles(TLSFiles{CA: "/nonexistent.pem"})); err == nil {
		t.Error("a missing CA file is accepted")
	}
	if _, err := Dial("127.0.0.1:1", WithTLSFiles(TLSFiles{Cert: "x.pem"})); err == nil {
		t.Error("a certificate without a key is accepted")
	}
	if _, err := Dial("127.0.0.1:1", WithToken("two words")); err == nil {
		t.Error("a token with a space is accepted")
	}
}
