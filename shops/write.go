package shops

import (
	"encoding/json"
	"os"
)

// WriteFile writes a registry file (File's shape) of the entries list,
// readable by its owner only (mode 0600): for tools and demos that make a
// registry; an operator's file is written by hand or by a deployment.
func WriteFile(path string, list []Shop) error {
	b, err := json.MarshalIndent(struct {
		Shops []Shop `json:"shops"`
	}{list}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}
