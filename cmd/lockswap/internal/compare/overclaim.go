//go:build lockswap_overclaim

package compare

import (
	"net/url"
	"time"
)

// Built only with -tags lockswap_overclaim, for the CLI test that runs the
// binary to a contradiction (exit 3): the column "overclaiming" is plain
// singleredis declaring that it survives a holder's pause, which it does
// not, so the holder-pause scenario contradicts its declaration. No
// lockswap binary built without the tag has this column.
func init() {
	backendInfos = append(backendInfos, backendInfo{name: "overclaiming", short: "over", shorthand: "overclaiming",
		column: func(q url.Values) (kit, string, error) {
			k, servers, err := redisColumn("singleredis", 1, q, 500*time.Millisecond, false, nil)
			k.guarantees.Backend = "overclaiming"
			k.guarantees.SurvivesHolderPause = true
			return k, servers, err
		}})
}
