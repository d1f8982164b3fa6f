// Package history checks a lock the way Jepsen checks one: clients take the
// lock and, while they hold it, read a register that nothing else protects
// and write back the value plus one. Each such critical section is recorded
// as one operation (Op) with its start and end on the monotonic clock, and
// Check asks Porcupine (github.com/anishathalye/porcupine) whether the
// recorded history could come from one correct sequence of increments. Two
// holders at once that both read the same value (a lost update) make it
// fail: a second holder becomes visible in the data, as it would in a
// user's.
//
// The register (Register) can check fences as a protected resource should:
// every request carries the holder's fence, and a request below the highest
// fence the register has seen for the key is rejected. A rejected section
// writes nothing, so the model takes it as a step that changes nothing; a
// stale holder that a fence stops leaves no trace in the count.
//
// Histories are written and read as JSON lines (WriteJSONL, ReadJSONL), one
// Op per line, so that a run can be archived and checked again later
// (docs/history.md gives the schema).
package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Op is one critical section: a client held the lock on Key, read the
// register Key, and wrote back the value read plus one. Its JSON form is
// one line of a history file.
type Op struct {
	// Client is the client (one Locker) that ran the section, from 0.
	Client int `json:"client"`
	// Key is the lock's key and the register it guards.
	Key string `json:"key"`
	// Token and Fence are the lock's (Fence 0: the backend gives none).
	Token string `json:"token"`
	Fence uint64 `json:"fence,omitempty"`
	// Read is the value the section read (0 when the register rejected
	// the read).
	Read int64 `json:"read"`
	// Wrote reports that the register accepted the write of Read + 1.
	// False only where the register checks fences and rejected the read
	// or the write as stale: the section changed nothing.
	Wrote bool `json:"wrote"`
	// Call and Return are when the section's read was sent and when its
	// write returned, in nanoseconds on the monotonic clock since the
	// recording began: the increment happened at some moment between.
	Call   int64 `json:"call_ns"`
	Return int64 `json:"return_ns"`
	// Late reports that the lock had ended (its Done channel was, or would
	// have been, closed) when the write returned: the holder outlived its lock (a pause past the TTL, a lock
	// found lost), so a violation involving this section is the client's
	// lateness, not the lock giving the key to two holders.
	Late bool `json:"late,omitempty"`
}

// Recorder collects the Ops of a run from any number of goroutines, with
// times on one monotonic clock.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	// chunks hold the Ops in order, recordChunk each but the last, so
	// that Add never copies the Ops recorded before (a growing slice
	// would: most of what recording cost a section).
	chunks [][]Op
	n      int
}

// recordChunk is how many Ops a chunk of a Recorder holds.
const recordChunk = 1024

// NewRecorder returns a Recorder whose clock starts now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the time since the recording began, in nanoseconds, on the
// monotonic clock (a jump of the wall clock does not move it).
func (r *Recorder) Now() int64 { return time.Since(r.start).Nanoseconds() }

// At is the time of a reading of Now, with a monotonic reading: it
// compares with time.Now's without reading the clock.
func (r *Recorder) At(ns int64) time.Time { return r.start.Add(time.Duration(ns)) }

// Add records op.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	last := len(r.chunks) - 1
	if last < 0 || len(r.chunks[last]) == recordChunk {
		r.chunks = append(r.chunks, make([]Op, 0, recordChunk))
		last++
	}
	r.chunks[last] = append(r.chunks[last], op)
	r.n++
	r.mu.Unlock()
}

// Ops returns a copy of the Ops recorded so far, in the order they were
// added.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Op, 0, r.n)
	for _, c := range r.chunks {
		out = append(out, c...)
	}
	return out
}

// WriteJSONL writes ops to w, one JSON object per line.
func WriteJSONL(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return fmt.Errorf("history: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

// ReadJSONL reads the Ops WriteJSONL wrote. A line that is not an Op (an
// unknown field, or one of client, key, token, read, wrote, call_ns and
// return_ns missing: a missing "wrote" would read as a rejected section
// and hide a lost update), or that Validate refuses, is an error that
// names the line.
func ReadJSONL(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &fields); err != nil {
			return nil, fmt.Errorf("history: line %d: %w", line, err)
		}
		for _, f := range requiredFields {
			if _, ok := fields[f]; !ok {
				return nil, fmt.Errorf("history: line %d: no %q", line, f)
			}
		}
		var op Op
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&op); err != nil {
			return nil, fmt.Errorf("history: line %d: %w", line, err)
		}
		if err := op.Validate(); err != nil {
			return nil, fmt.Errorf("history: line %d: %w", line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return ops, nil
}

// requiredFields are the JSON fields every line of a history has.
var requiredFields = []string{"client", "key", "token", "read", "wrote", "call_ns", "return_ns"}

// Validate reports what makes op impossible to check: a negative client or
// time, an empty key, or a Return before its Call.
func (op Op) Validate() error {
	switch {
	case op.Client < 0:
		return fmt.Errorf("client %d is negative", op.Client)
	case op.Key == "":
		return fmt.Errorf("the key is empty")
	case op.Call < 0:
		return fmt.Errorf("call_ns %d is negative", op.Call)
	case op.Return < op.Call:
		return fmt.Errorf("return_ns %d is before call_ns %d", op.Return, op.Call)
	}
	return nil
}
