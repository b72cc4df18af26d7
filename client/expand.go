package client

import (
	"context"
	"strconv"
)

// ExpandVolume grows a volume to size bytes (the manager rounds it up to
// a multiple of 2 MiB) and answers the volume.
func (c *Client) ExpandVolume(ctx context.Context, name string, size int64) (*Volume, error) {
	v := &Volume{}
	return v, c.action(ctx, "volumes", name, "expand", map[string]string{"size": strconv.FormatInt(size, 10)}, v)
}

// ActualSize is the size in bytes the volume's engine has: the volume's
// data plane grew to it. 0 when the volume has no engine object yet.
func (v *Volume) ActualSize() int64 {
	if len(v.Controllers) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(v.Controllers[0].ActualSize, 10, 64)
	return n
}
