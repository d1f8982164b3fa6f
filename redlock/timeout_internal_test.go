package redlock

import (
	"testing"
	"time"
)

// testProto is a proto over n instances with opts's timeout settings and
// the default drift, without connections: enough for the timeouts.
func testProto(n int, opts Options) *proto {
	opts.DriftFactor, opts.DriftFixed = DefaultDriftFactor, DefaultDriftFixed
	p := &proto{inst: make([]instance, n), quorum: n/2 + 1, opts: opts}
	p.fan = &fanout{lk: p, rtt: make([]rtt, n)}
	return p
}

// TestRTTEstimator: the smoothed round trip and its deviation follow RFC
// 6298; the timeout is srtt + 4 × rttvar, at least InstanceTimeoutFloor,
// InitialInstanceTimeout before any sample; a timeout doubles what the
// request had, up to InitialInstanceTimeout, and the next sample clears
// that.
func TestRTTEstimator(t *testing.T) {
	var r rtt
	if got := r.timeout(); got != InitialInstanceTimeout {
		t.Fatalf("no sample: timeout %v, want InitialInstanceTimeout %v", got, InitialInstanceTimeout)
	}
	r.sample(time.Millisecond)
	if got := r.timeout(); got != InstanceTimeoutFloor {
		t.Fatalf("one 1 ms sample: timeout %v, want the floor %v", got, InstanceTimeoutFloor)
	}
	// 80 ms samples after 1 ms ones: srtt climbs to 80 ms and rttvar
	// goes to 0; the deviation, counted 4 times, keeps the timeout above
	// 80 ms from the first such sample on, and it comes down to 80 ms.
	var prev time.Duration
	for n := 0; n < 200; n++ {
		r.sample(80 * time.Millisecond)
		if prev = r.timeout(); prev <= 80*time.Millisecond {
			t.Fatalf("80 ms sample %d after 1 ms ones: timeout %v, want above 80 ms", n, prev)
		}
	}
	if prev > 81*time.Millisecond {
		t.Fatalf("after 200 samples of 80 ms: timeout %v, want 80 ms", prev)
	}
	// Timeouts double what the request had, up to the initial timeout.
	r.timedOut(300 * time.Millisecond)
	if got := r.timeout(); got != 600*time.Millisecond {
		t.Fatalf("after a 300 ms timeout: %v, want 600 ms", got)
	}
	r.timedOut(100 * time.Millisecond) // an earlier, shorter request: no less
	if got := r.timeout(); got != 600*time.Millisecond {
		t.Fatalf("after a shorter timeout: %v, want still 600 ms", got)
	}
	r.timedOut(600 * time.Millisecond)
	if got := r.timeout(); got != InitialInstanceTimeout {
		t.Fatalf("after a 600 ms timeout: %v, want InitialInstanceTimeout %v", got, InitialInstanceTimeout)
	}
	r.sample(80 * time.Millisecond)
	if got := r.timeout(); got > 81*time.Millisecond {
		t.Fatalf("an answer after the timeouts: %v, want the measured 80 ms again", got)
	}
}

// TestInstanceTimeoutChoice: the call's timeout is the quorum-th shortest
// instance timeout (a silent minority does not set it), within the TTL's
// budget and never below MinInstanceTimeout; Options.InstanceTimeout wins;
// the TTL range does not move with the samples.
func TestInstanceTimeoutChoice(t *testing.T) {
	p := testProto(5, Options{})
	ttl := 10 * time.Second
	if got := p.instanceTimeout(ttl); got != InitialInstanceTimeout {
		t.Fatalf("no samples: %v, want InitialInstanceTimeout", got)
	}
	if err := p.setTTLRange(); err != nil {
		t.Fatal(err)
	}
	before := p.minTTL
	for i, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 200 * time.Millisecond} {
		for range 100 {
			p.fan.rtt[i].sample(d)
		}
	}
	// Two instances never answered (1 s each): the quorum of 3 is two fast
	// ones and the 200 ms one.
	if got := p.instanceTimeout(ttl); got < 200*time.Millisecond || got > 201*time.Millisecond {
		t.Fatalf("timeouts {floor, floor, 200 ms, 1 s, 1 s}: %v, want the third, 200 ms", got)
	}
	for range 100 {
		p.fan.rtt[3].sample(time.Millisecond)
	}
	if got := p.instanceTimeout(ttl); got != InstanceTimeoutFloor {
		t.Fatalf("three fast instances: %v, want the floor %v", got, InstanceTimeoutFloor)
	}
	p.fan.rtt[4].timedOut(time.Second) // a silent minority
	p.fan.rtt[2].timedOut(time.Second)
	if got := p.instanceTimeout(ttl); got != InstanceTimeoutFloor {
		t.Fatalf("two silent instances of five: %v, want the floor %v", got, InstanceTimeoutFloor)
	}
	// The TTL's budget caps it: 40 ms leaves 40 − 10 − 2.4 = 27.6 ms at
	// most; 12 ms leaves 9 − 2.12 = 6.88 ms.
	for range 100 {
		for i := range p.fan.rtt {
			p.fan.rtt[i].sample(300 * time.Millisecond)
		}
	}
	for _, c := range []struct{ ttl, want time.Duration }{
		{40 * time.Millisecond, 27600 * time.Microsecond},
		{12 * time.Millisecond, 6880 * time.Microsecond},
		{time.Second, 300 * time.Millisecond},
	} {
		got := p.instanceTimeout(c.ttl)
		if got < c.want-time.Millisecond || got > c.want+time.Millisecond {
			t.Errorf("300 ms round trips, TTL %v: %v, want %v", c.ttl, got, c.want)
		}
		if v := c.ttl - got - p.drift(c.ttl); v < c.ttl/4 {
			t.Errorf("TTL %v: timeout %v leaves %v of validity, less than a quarter", c.ttl, got, v)
		}
	}
	if err := p.setTTLRange(); err != nil || p.minTTL != before {
		t.Fatalf("TTL range after samples: min %v (%v), want %v as before them", p.minTTL, err, before)
	}
	fixed := testProto(5, Options{InstanceTimeout: 7 * time.Millisecond})
	fixed.fan.rtt[0].sample(time.Second)
	if got := fixed.instanceTimeout(ttl); got != 7*time.Millisecond {
		t.Fatalf("Options.InstanceTimeout 7 ms: %v", got)
	}
}
