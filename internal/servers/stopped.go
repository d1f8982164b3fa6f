package servers

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// WaitStopped waits until the process pid is stopped by SIGSTOP (its state
// in /proc is "T"), for at most 5 s: a signal is delivered asynchronously,
// and a request sent right after kill(2) may still be served. It returns
// false if the process was not seen stopped; where /proc is missing it
// returns true at once.
func WaitStopped(pid int) bool {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return os.IsNotExist(err) && !procMounted()
		}
		// The state follows the command name, which is in parentheses.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

func procMounted() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}
