package testnats

import (
	"strings"
	"time"
)

// AwaitRefusal waits up to d for an error on refused (a connection's
// async error handler's channel) that contains want, such as
// `Subscription to "x.>"`: the server refused it. Other errors (earlier
// refusals) are skipped. It says whether one came.
func AwaitRefusal(refused <-chan error, want string, d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case err := <-refused:
			if strings.Contains(err.Error(), want) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}
