package client

import "context"

// SnapshotObject is a volume's Snapshot object as the API shows it
// (snapshotCRGet): readable whether the volume is attached or not.
type SnapshotObject struct {
	Name        string `json:"name"`
	Volume      string `json:"volume"`
	MarkRemoved bool   `json:"markRemoved"`
	ReadyToUse  bool   `json:"readyToUse"`
	Error       string `json:"error"`
}

// SnapshotObject reads the Snapshot object of a volume's snapshot; 404
// when the volume has none of that name.
func (c *Client) SnapshotObject(ctx context.Context, volume, name string) (*SnapshotObject, error) {
	s := &SnapshotObject{}
	return s, c.action(ctx, "volumes", volume, "snapshotCRGet", map[string]string{"name": name}, s)
}
