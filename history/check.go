package history

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is what Check found.
type Result struct {
	// Linearizable reports that every key's history could come from one
	// correct sequence of increments.
	Linearizable bool
	// Violations are the keys whose history could not (a lost update or a
	// value out of thin air), sorted.
	Violations []string
	// Unknown are the keys the checker gave up on within its timeout,
	// sorted: nothing was concluded about them.
	Unknown []string

	info map[string]porcupine.LinearizationInfo
}

// Model is the sequential specification Check uses, one state per key: the
// register's value. A section that the register accepted must have read
// the value every section before it left, and leaves it one higher; a
// section the register rejected (a stale fence) is a step that changes
// nothing. Porcupine partitions the history by key.
var Model = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range ops {
			k := op.Input.(Op).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		slices.Sort(keys)
		out := make([][]porcupine.Operation, len(keys))
		for i, k := range keys {
			out[i] = byKey[k]
		}
		return out
	},
	Init: func() any { return int64(0) },
	Step: func(state, input, _ any) (bool, any) {
		v, op := state.(int64), input.(Op)
		if !op.Wrote {
			return true, v
		}
		return op.Read == v, v + 1
	},
	DescribeOperation: func(input, _ any) string {
		op := input.(Op)
		if !op.Wrote {
			return fmt.Sprintf("client %d fence %d: rejected", op.Client, op.Fence)
		}
		return fmt.Sprintf("client %d fence %d: read %d, wrote %d", op.Client, op.Fence, op.Read, op.Read+1)
	},
	DescribeState: func(state any) string { return fmt.Sprint(state.(int64)) },
}

// Check decides whether ops are linearizable under Model, key by key,
// giving the checker at most timeout per key (0: no limit).
func Check(ops []Op, timeout time.Duration) Result {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range ops {
		byKey[op.Key] = append(byKey[op.Key], porcupine.Operation{ClientId: op.Client, Input: op, Call: op.Call, Return: op.Return})
	}
	r := Result{Linearizable: true, info: map[string]porcupine.LinearizationInfo{}}
	for key, h := range byKey {
		res, info := porcupine.CheckOperationsVerbose(Model, h, timeout)
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Illegal:
			r.Violations = append(r.Violations, key)
		default:
			r.Unknown = append(r.Unknown, key)
		}
		r.Linearizable = false
		r.info[key] = info
	}
	slices.Sort(r.Violations)
	slices.Sort(r.Unknown)
	return r
}

// Visualize writes Porcupine's HTML view of key's history (the longest
// linearizable prefixes, and where they end) to w: open it in a browser to
// see the counterexample. Only keys in Violations or Unknown have one.
func (r Result) Visualize(key string, w io.Writer) error {
	info, ok := r.info[key]
	if !ok {
		return fmt.Errorf("history: no counterexample for key %q", key)
	}
	return porcupine.Visualize(Model, info, w)
}
