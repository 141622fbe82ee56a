package chunkd

// Version is the release of chunkd this module belongs to: the repository's
// VERSION file, which also versions the server, chunkctl, the Python
// package and the chart (version_test.go keeps them equal).
const Version = "0.4.0"
