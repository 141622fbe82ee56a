package chunkd

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRootFile reads a file of the repository that holds this module (two
// directories up). Outside it (a copy of the module from a proxy) there is
// nothing to compare with, and the test says so.
func repoRootFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", name))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s not found two directories up: not in the chunkd repository", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Version is the repository's VERSION file, which versions chunkd, chunkctl,
// the Python package and the chart too.
func TestVersionIsTheRepositoryVersion(t *testing.T) {
	want := strings.TrimSpace(string(repoRootFile(t, "VERSION")))
	if Version != want {
		t.Errorf("Version = %q, the VERSION file says %q: change version.go", Version, want)
	}
}

// The module's LICENSE (where the Go tooling and pkg.go.dev look for it) is
// a copy of the repository's.
func TestLicenseIsTheRepositoryLicense(t *testing.T) {
	want := repoRootFile(t, "LICENSE")
	got, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("clients/go/LICENSE differs from the repository's LICENSE: copy it again")
	}
	if !bytes.Contains(got, []byte("Apache License")) || !bytes.Contains(got, []byte("Version 2.0")) {
		t.Error("LICENSE is not the Apache License 2.0")
	}
}
