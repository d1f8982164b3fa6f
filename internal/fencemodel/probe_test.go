package fencemodel

import (
	"strings"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	for _, b := range []Bounds{
		{Clients: 2, Deliveries: 1, Losses: 0, Ticks: 0},
		{Clients: 2, Deliveries: 2, Losses: 1, Ticks: 1},
	} {
		for _, v := range []Variant{Protocol, NaiveRead, NaiveIncr, SketchHeldNoCAS, NoRestartSeed, UnconditionalWriteBack, ProtocolHoldCheck} {
			m := Model{V: v, B: b}
			t0 := time.Now()
			r := m.Explore()
			t.Logf("%+v %s: states=%d trans=%d depth=%d complete=%v %v viol=%v\n%s", b, v.Name, r.States, r.Transitions, r.Depth, r.Complete, time.Since(t0), r.Violation, strings.Join(r.Trace, "\n"))
		}
	}
}
