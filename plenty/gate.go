package plenty

import "errors"

// ErrFenced: Config.Gate refused the request (this process is not the
// active replica of its group, or its lease deadline passed); nothing was
// sent and the call is not retried.
var ErrFenced = errors.New("call held back: not the active replica")
