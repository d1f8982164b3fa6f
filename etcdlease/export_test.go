package etcdlease

import (
	"github.com/lockswap/lockswap/internal/optionstest"
	"github.com/lockswap/lockswap/registry"
)

// URLOptions returns the Options the URL raw sets, once registry has
// checked it (urlOptions).
func URLOptions(raw string) (Options, error) {
	u, err := optionstest.Checked(raw)
	if err != nil {
		return Options{}, err
	}
	return urlOptions(u, registry.Clients{})
}
