package migrate

import (
	"github.com/lockswap/lockswap/internal/optionstest"
	"github.com/lockswap/lockswap/registry"
)

// URLOptions returns the Options the URL raw sets, once registry has
// checked it (urlOptions), without the Lockers Open makes of legacy= and
// target=.
func URLOptions(raw string) (Options, error) { return URLOptionsWith(raw, registry.Clients{}) }

// URLOptionsWith is URLOptions with the clients and settings c.
func URLOptionsWith(raw string, c registry.Clients) (Options, error) {
	u, err := optionstest.Checked(raw)
	if err != nil {
		return Options{}, err
	}
	o, _, _, err := urlOptions(u, c)
	return o, err
}
