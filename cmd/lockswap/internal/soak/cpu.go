package soak

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// processCPU returns the CPU time (user + system) that process pid ("self"
// for this one) has used so far, from /proc; false where /proc is missing
// (not Linux) or the process is gone.
func processCPU(pid string) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStat(string(b))
}

// parseStat returns utime + stime of a /proc/<pid>/stat line; false when
// the line is not one.
func parseStat(s string) (time.Duration, bool) {
	// The command name (field 2) may hold spaces and ")": count from the
	// last ")".
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * clockTick, true
}

// cpuMeter adds up the CPU time of this process and of the servers a soak
// started (redis-server processes by PID; embedded etcd runs in this
// process): what a cycle costs the machine, the client's side and the
// server's together.
type cpuMeter struct {
	pids []string // "self" first
}

// read returns the meter's processes' CPU time so far; false when any of
// them could not be read.
func (m cpuMeter) read() (time.Duration, bool) {
	var total time.Duration
	for _, pid := range m.pids {
		t, ok := processCPU(pid)
		if !ok {
			return 0, false
		}
		total += t
	}
	return total, true
}

func (m *cpuMeter) addPID(pid int) { m.pids = append(m.pids, fmt.Sprint(pid)) }
