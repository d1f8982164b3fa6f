package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/history"
	"github.com/lockswap/lockswap/memlock"
)

// BenchmarkMemlockCycle is what the recorder costs a critical section
// (issue 32: at most 5% of a memlock cycle). Both take and release a
// memlock lock and read and increment the register under it; "recorded"
// runs the section through history.Section, which reads the monotonic
// clock twice, asks whether the lock ended and appends the Op to a
// Recorder. A new Recorder every 4096 sections keeps the history at the
// size of a run's (a 5-minute soak of singleredis records about 4300):
// one Recorder for every b.N sections would measure the garbage
// collector scanning a history of millions.
//
//	go test -run '^$' -bench BenchmarkMemlockCycle -count 10 ./history/ | tee /tmp/rec.txt
//	benchstat -col /mode /tmp/rec.txt   (or compare the ns/op by eye)
func BenchmarkMemlockCycle(b *testing.B) {
	ctx := context.Background()
	for _, recorded := range []bool{false, true} {
		b.Run(map[bool]string{false: "mode=bare", true: "mode=recorded"}[recorded], func(b *testing.B) {
			lk := memlock.New(memlock.NewStore())
			defer lk.Close()
			reg, rec := history.NewRegister(false), history.NewRecorder()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if n++; n%4096 == 0 {
					rec = history.NewRecorder()
				}
				l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				if recorded {
					history.Section(ctx, rec, reg, 0, l, nil)
				} else if v, ok := reg.Read("k", 0); ok {
					reg.Write("k", v+1, 0)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSectionRecording isolates what recording adds to a section:
// "recorded" runs history.Section under one held lock, "register" only
// the register's read and increment that Section also does; the
// difference is the recorder's (clock reads, the lock's end check, the
// append).
func BenchmarkSectionRecording(b *testing.B) {
	ctx := context.Background()
	b.Run("mode=register", func(b *testing.B) {
		reg := history.NewRegister(false)
		for b.Loop() {
			if v, ok := reg.Read("k", 0); ok {
				reg.Write("k", v+1, 0)
			}
		}
	})
	b.Run("mode=recorded", func(b *testing.B) {
		lk := memlock.New(memlock.NewStore())
		defer lk.Close()
		l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		defer l.Release(ctx)
		reg, rec := history.NewRegister(false), history.NewRecorder()
		n := 0
		for b.Loop() {
			if n++; n%4096 == 0 {
				rec = history.NewRecorder()
			}
			history.Section(ctx, rec, reg, 0, l, nil)
		}
	})
}
