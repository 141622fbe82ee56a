package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// progress is the one-line progress display of a file on stderr: bytes
// done, rate and, when the size is known, a bar, the percentage and the ETA
// (the line chunkctl and chunkd-client draw). A nil *progress draws nothing.
type progress struct {
	w        io.Writer
	label    string
	total    uint64 // 0: unknown (stdin, a pipe)
	start    time.Time
	lastDraw time.Time
	done     uint64
}

const (
	barWidth      = 24
	redrawEvery   = 100 * time.Millisecond
	progressClear = "\r\x1b[K"
)

// newProgress returns the display of file (size 0: unknown) on w when
// --progress asks for one: always, or auto when w is a terminal.
func newProgress(when string, w io.Writer, label string, size uint64) *progress {
	if when == "never" || (when == "auto" && !isTerminal(w)) {
		return nil
	}
	now := time.Now()
	return &progress{w: w, label: label, total: size, start: now, lastDraw: now.Add(-redrawEvery)}
}

// isTerminal reports whether w is a character device (a terminal; or
// /dev/null, where drawing is harmless).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// update records that done bytes are chunked; redraws at most ten times a
// second.
func (p *progress) update(done uint64) {
	if p == nil {
		return
	}
	p.done = done
	if now := time.Now(); now.Sub(p.lastDraw) >= redrawEvery {
		p.lastDraw = now
		p.draw(now)
	}
}

// finish draws the final state and ends the line.
func (p *progress) finish() {
	if p == nil {
		return
	}
	p.draw(time.Now())
	fmt.Fprintln(p.w)
}

// clear erases the line drawn so far, for a line of text in its place; the
// next update draws it again.
func (p *progress) clear() {
	if p == nil {
		return
	}
	fmt.Fprint(p.w, progressClear)
	p.lastDraw = time.Now().Add(-redrawEvery)
}

func (p *progress) draw(now time.Time) {
	fmt.Fprint(p.w, progressClear+progressLine(p.label, p.done, p.total, now.Sub(p.start).Seconds()))
}

// progressLine is the text of the display for done of total bytes after
// seconds.
func progressLine(label string, done, total uint64, seconds float64) string {
	rate := float64(done) / math.Max(seconds, 1e-9)
	parts := []string{label}
	if total > 0 {
		fraction := math.Min(float64(done)/float64(total), 1)
		filled := int(fraction * barWidth)
		parts = append(parts, "["+strings.Repeat("#", filled)+strings.Repeat("-", barWidth-filled)+"]",
			fmt.Sprintf("%5.1f%%", fraction*100), humanBytes(float64(done))+"/"+humanBytes(float64(total)))
	} else {
		parts = append(parts, humanBytes(float64(done)))
	}
	parts = append(parts, humanBytes(rate)+"/s")
	if total > 0 && rate > 0 {
		parts = append(parts, "ETA "+clockTime(float64(total-min(done, total))/rate))
	}
	return strings.Join(parts, " ")
}

// humanBytes is "1.5 MiB" and the like.
func humanBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	unit := 0
	for n >= 1024 && unit+1 < len(units) {
		n /= 1024
		unit++
	}
	if unit == 0 {
		return fmt.Sprintf("%.0f B", n)
	}
	return fmt.Sprintf("%.1f %s", n, units[unit])
}

// clockTime is "m:ss", or "h:mm:ss" from an hour.
func clockTime(seconds float64) string {
	s := uint64(math.Round(math.Max(seconds, 0)))
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
