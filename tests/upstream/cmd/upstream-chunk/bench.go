package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// benchResult is the JSON line of -bench.
type benchResult struct {
	Algorithm   string  `json:"algorithm"`
	Bytes       int     `json:"bytes"`
	Chunks      int     `json:"chunks"`
	BestSeconds float64 `json:"best_seconds"`
	GBPerS      float64 `json:"gb_per_s"`
}

// measure chunks data cfg.repeat times, from memory, and keeps the fastest
// run. Every run must give the same chunk count: the upstream code is
// deterministic, so a difference is a bug worth stopping for.
func measure(cfg config, data []byte) (benchResult, error) {
	result := benchResult{Algorithm: cfg.params.algorithm, Bytes: len(data)}
	for run := 0; run < cfg.repeat; run++ {
		chunks := 0
		start := time.Now()
		err := chunkStream(cfg.params, bytes.NewReader(data), func(int) { chunks++ })
		elapsed := time.Since(start).Seconds()
		if err != nil {
			return benchResult{}, err
		}
		if run > 0 && chunks != result.Chunks {
			return benchResult{}, fmt.Errorf("run %d gave %d chunks, run 0 gave %d", run, chunks, result.Chunks)
		}
		result.Chunks = chunks
		if run == 0 || elapsed < result.BestSeconds {
			result.BestSeconds = elapsed
		}
	}
	if result.BestSeconds > 0 {
		result.GBPerS = float64(len(data)) / result.BestSeconds / 1e9
	}
	return result, nil
}

func runBench(cfg config, w io.Writer) error {
	data, err := os.ReadFile(cfg.path)
	if err != nil {
		return err
	}
	result, err := measure(cfg, data)
	if err != nil {
		return err
	}
	line, err := json.Marshal(result)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}
