"""The release of chunkd this package belongs to: the repository's VERSION
file, which also versions the server, chunkctl, the Go module and the chart."""

__version__ = "0.4.0"
