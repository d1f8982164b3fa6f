package history

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is what Check found.
type Result struct {
	// Linearizable reports that every key's history could come from one
	// correct sequence of increments (the fences are checked apart:
	// Fences).
	Linearizable bool
	// Violations are the keys whose history could not (a lost update or a
	// value out of thin air), sorted.
	Violations []string
	// Unknown are the keys the checker gave up on within its timeout,
	// sorted: nothing was concluded about them.
	Unknown []string
	// Fences are the fence violations, described: a section whose lock
	// was taken after another section had returned, with a fence not
	// above that one's (an order the register alone does not show: it
	// rejects the later holder, and a rejected section changes nothing),
	// and a fence given to two locks. Sections without a fence are left
	// out.
	Fences []string

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
// giving the checker at most timeout per key (0: no limit), and checks
// their fences (Result.Fences). It fails on an Op that Validate refuses.
func Check(ops []Op, timeout time.Duration) (Result, error) {
	byKey := map[string][]Op{}
	for i, op := range ops {
		if err := op.Validate(); err != nil {
			return Result{}, fmt.Errorf("history: op %d: %w", i, err)
		}
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	r := Result{Linearizable: true, info: map[string]porcupine.LinearizationInfo{}}
	for key, kops := range byKey {
		r.Fences = append(r.Fences, fenceViolations(key, kops)...)
		h := make([]porcupine.Operation, len(kops))
		for i, op := range kops {
			h[i] = porcupine.Operation{ClientId: op.Client, Input: op, Call: op.Call, Return: op.Return}
		}
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
	slices.Sort(r.Fences)
	return r, nil
}

// fenceViolations checks the fences of one key's sections: a section
// called after another returned has a higher fence, and no two locks
// share one.
func fenceViolations(key string, ops []Op) []string {
	var fenced []Op
	for _, op := range ops {
		if op.Fence != 0 {
			fenced = append(fenced, op)
		}
	}
	var out []string
	owner := map[uint64]string{}
	for _, op := range fenced {
		if t, ok := owner[op.Fence]; ok && t != op.Token {
			out = append(out, fmt.Sprintf("key %q: fence %d given to two locks", key, op.Fence))
		}
		owner[op.Fence] = op.Token
	}
	// By return time, with the highest fence returned so far.
	slices.SortFunc(fenced, func(a, b Op) int { return cmp.Compare(a.Return, b.Return) })
	best := make([]int, len(fenced)) // best[i]: index of the highest fence among fenced[:i+1]
	for i := range fenced {
		best[i] = i
		if i > 0 && fenced[best[i-1]].Fence >= fenced[i].Fence {
			best[i] = best[i-1]
		}
	}
	for _, b := range fenced {
		n, _ := slices.BinarySearchFunc(fenced, b.Call, func(op Op, t int64) int { return cmp.Compare(op.Return, t) })
		if n == 0 {
			continue // no section returned before b was called
		}
		if a := fenced[best[n-1]]; a.Fence >= b.Fence && a.Token != b.Token {
			out = append(out, fmt.Sprintf("key %q: client %d's fence %d (called at %d ns) is not above client %d's fence %d (returned at %d ns)",
				key, b.Client, b.Fence, b.Call, a.Client, a.Fence, a.Return))
		}
	}
	return out
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
