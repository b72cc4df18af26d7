package instancemanager

import (
	"context"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager/pb"
)

// ServeReplica has the instance manager serve replica rd of volume (of
// UID volumeUID and size bytes) to engines elsewhere over the replica
// protocol, and says where (Address).
func (c *Client) ServeReplica(volume, volumeUID string, rd instance.ReplicaDir, size int64) (instance.ServedReplica, error) {
	r := &pb.Replica{Name: rd.Name, Dir: rd.Dir, New: rd.New, Failed: rd.Failed}
	if b := rd.Backing; b != nil {
		r.Backing = &pb.BackingFile{Path: b.Path, Name: b.Name, Checksum: b.Checksum, FileSize: b.FileSize}
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	out, err := c.im.ServeReplica(ctx, &pb.ServeReplicaRequest{Replica: r, Volume: volume, VolumeUid: volumeUID, Size: size})
	if err != nil {
		return instance.ServedReplica{}, fromStatus(err)
	}
	return servedFromPB(out), nil
}

// StopReplica has the instance manager stop serving a replica.
func (c *Client) StopReplica(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err := c.im.StopReplica(ctx, &pb.ReplicaRef{Name: name})
	return fromStatus(err)
}

// ListReplicas is what the instance manager serves, and its replica
// address ("" when it serves none).
func (c *Client) ListReplicas() ([]instance.ServedReplica, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	out, err := c.im.ListReplicas(ctx, &pb.Empty{})
	if err != nil {
		return nil, "", fromStatus(err)
	}
	list := make([]instance.ServedReplica, 0, len(out.Replicas))
	for _, r := range out.Replicas {
		list = append(list, servedFromPB(r))
	}
	return list, out.Address, nil
}

func servedFromPB(r *pb.ServedReplica) instance.ServedReplica {
	return instance.ServedReplica{Name: r.Name, Volume: r.Volume, VolumeUID: r.VolumeUid, Dir: r.Dir, Size: r.Size,
		Epoch: r.Epoch, Term: r.Term, Engine: r.Engine, Address: r.Address}
}
