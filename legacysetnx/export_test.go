package legacysetnx

import "github.com/lockswap/lockswap/internal/optionstest"

// Waiting returns how many Acquire calls of lk wait for key (tests).
func Waiting(lk *Locker, key string) int { return lk.Locker.Waiting(key) }

// URLOptions returns the Options the URL raw sets, once registry has
// checked it (urlOptions).
func URLOptions(raw string) (Options, error) {
	u, r, err := optionstest.CheckedRedis("legacysetnx", raw)
	if err != nil {
		return Options{}, err
	}
	return urlOptions(u, r)
}
