package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	chunkd "github.com/chunkd/chunkd/clients/go"
)

// setsFlag collects the --set arguments.
type setsFlag struct{ specs *[]string }

func (f setsFlag) String() string { return "" }

func (f setsFlag) Set(text string) error {
	*f.specs = append(*f.specs, text)
	return nil
}

func (o *options) estimateFlags(fs *flag.FlagSet) {
	fs.Var(setsFlag{&o.sets}, "set", "a parameter set, `SPEC`: ALGO or ALGO:KEY=VALUE,... (KEY a chunking flag or preset); "+
		"1 to 16 of them, e.g. --set fastcdc:avg=16384 --set seqcdc:preset=seqcdc-16k")
	fs.Uint64Var(&o.sample, "sample", 1, "keep 1 in `N` distinct chunks (consistent sampling), 1..1048576; 1: exact")
	fs.Var(choiceFlag{&o.fingerprint, []string{"xxh128", "sha256"}}, "fingerprint",
		"xxh128 or sha256 (default xxh128, sha256 with --namespace)")
	fs.StringVar(&o.namespace, "namespace", "", "compare with the namespace `NS`, read only")
	fs.StringVar(&o.plot, "plot", "", "a picture to draw, `FILE` (.png or .svg): writes the JSON to FILE "+
		"with the extension .json and prints the chunkd-client plot command that draws it")
	fs.IntVar(&o.messageSize, "message-size", chunkd.DefaultMessageSize, "input bytes per data message (`N`)")
}

// estimateSets checks the command line of estimate and parses its sets.
func estimateSets(o *options, args []string) ([]chunkd.EstimateSet, error) {
	switch {
	case len(o.sets) == 0:
		return nil, usageError{"missing --set SPEC (e.g. --set fastcdc:avg=16384)"}
	case len(o.sets) > chunkd.MaxEstimateSets:
		return nil, usageError{fmt.Sprintf("at most %d --set, got %d", chunkd.MaxEstimateSets, len(o.sets))}
	case o.sample < 1 || o.sample > chunkd.MaxSampleRate:
		return nil, usageError{fmt.Sprintf("--sample %d is out of range: 1..%d", o.sample, chunkd.MaxSampleRate)}
	case o.given["namespace"] && o.namespace == "":
		return nil, usageError{"--namespace: give a namespace"}
	case checkNamespace(o.namespace) != nil:
		return nil, checkNamespace(o.namespace)
	case o.messageSize < 1:
		return nil, usageError{"--message-size must be at least 1"}
	case len(args) == 0:
		return nil, usageError{"missing FILE (a file, a directory or \"-\" for stdin)"}
	case countStdin(args) > 1:
		return nil, usageError{"stdin (\"-\") can be read only once"}
	}
	if ext := strings.ToLower(filepath.Ext(o.plot)); o.plot != "" && ext != ".png" && ext != ".svg" {
		return nil, usageError{fmt.Sprintf("--plot %s: give a .png or .svg file name", o.plot)}
	}
	sets := make([]chunkd.EstimateSet, 0, len(o.sets))
	for _, spec := range o.sets {
		set, err := chunkd.ParseSet(spec)
		var argErr *chunkd.ArgumentError
		if errors.As(err, &argErr) {
			return nil, usageError{"--" + argErr.Field + ": " + argErr.Problem}
		}
		sets = append(sets, set)
	}
	return sets, nil
}

func countStdin(args []string) int {
	n := 0
	for _, name := range args {
		if name == "-" {
			n++
		}
	}
	return n
}

// dataSetSize is the bytes of the files names, 0 (unknown) when one is not
// a regular file.
func dataSetSize(names []string) uint64 {
	var total uint64
	for _, name := range names {
		info, err := os.Stat(name)
		if name == "-" || err != nil || !info.Mode().IsRegular() {
			return 0
		}
		total += uint64(info.Size())
	}
	return total
}

func runEstimate(ctx context.Context, o *options, args []string, e env) error {
	sets, err := estimateSets(o, args)
	if err != nil {
		return err
	}
	names, err := chunkd.ExpandPaths(args...)
	if err != nil {
		return err
	}
	client, err := o.dial()
	if err != nil {
		return err
	}
	defer client.Close()
	label := fmt.Sprintf("%d files", len(names))
	if len(args) == 1 {
		label = args[0]
	}
	bar := newProgress(o.progress, e.stderr, label, dataSetSize(names))
	result, err := client.EstimatePaths(ctx, sets, chunkd.EstimateOptions{
		SampleRate: uint32(o.sample), Namespace: o.namespace, Fingerprint: o.fingerprint,
		MessageSize: o.messageSize, Timeout: o.timeout,
		OnProgress: func(p chunkd.EstimateProgress) { bar.update(p.Bytes) },
	}, names...)
	if err != nil {
		return err
	}
	bar.update(result.TotalBytes)
	bar.finish()
	if o.asJSON() {
		_, err = fmt.Fprintf(e.out, "%s\n", result.JSON())
	} else {
		_, err = e.out.WriteString(result.Table())
	}
	if err != nil || o.plot == "" {
		return err
	}
	path := strings.TrimSuffix(o.plot, filepath.Ext(o.plot)) + ".json"
	if err := os.WriteFile(path, append(result.JSON(), '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s; draw %s with: chunkd-client plot %s %s\n", path, o.plot, path, o.plot)
	return nil
}
