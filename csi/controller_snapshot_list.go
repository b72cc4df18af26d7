package csi

import (
	"context"
	"sort"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
)

// ListSnapshots pages through the CSI snapshots: the Longhorn snapshots
// of every volume (snap://) and the backups in the backup target
// (bak://, those of volumes of other clusters too), by handle. With
// snapshot_id it answers that one alone (how the external-snapshotter
// checks a VolumeSnapshotContent made by hand); with source_volume_id,
// that volume's. A token is the index of the next entry.
func (s *controllerServer) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, status.Error(codes.InvalidArgument, "max_entries: cannot be negative")
	}
	var entries []*csi.Snapshot
	var err error
	if id := req.GetSnapshotId(); id != "" {
		entries, err = s.listOne(ctx, id)
	} else {
		entries, err = s.listAll(ctx, req.GetSourceVolumeId())
	}
	if err != nil {
		return nil, err
	}
	if v := req.GetSourceVolumeId(); v != "" {
		kept := entries[:0]
		for _, e := range entries {
			if e.SourceVolumeId == v {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].SnapshotId < entries[j].SnapshotId })
	start := 0
	if t := req.GetStartingToken(); t != "" {
		if start, err = strconv.Atoi(t); err != nil || start < 0 || start > len(entries) {
			return nil, status.Errorf(codes.Aborted, "starting_token: %q is not a token this driver gave, or the list has changed", t)
		}
	}
	end := len(entries)
	if n := int(req.GetMaxEntries()); n > 0 && start+n < end {
		end = start + n
	}
	resp := &csi.ListSnapshotsResponse{}
	for _, e := range entries[start:end] {
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: e})
	}
	if end < len(entries) {
		resp.NextToken = strconv.Itoa(end)
	}
	return resp, nil
}

// listOne is the snapshot a handle names, none when it names nothing.
func (s *controllerServer) listOne(ctx context.Context, id string) ([]*csi.Snapshot, error) {
	h, err := parseSnapshotHandle(id)
	if err != nil {
		return nil, nil
	}
	api := s.d.api
	if h.kind == snapshotTypeBi {
		// Listed by its handle only: the backing images are not listed
		// with the snapshots, as Longhorn's driver does not.
		entry, err := s.backingImageEntry(ctx, h)
		if entry == nil || err != nil {
			return nil, err
		}
		return []*csi.Snapshot{entry}, nil
	}
	if h.kind == snapshotTypeSnap {
		snap, err := api.SnapshotObject(ctx, h.volume, h.name)
		if client.IsNotFound(err) {
			return nil, nil
		} else if err != nil {
			return nil, apiStatus(err, "read snapshot "+h.name+" of volume "+h.volume)
		}
		if snap.MarkRemoved {
			return nil, nil // being deleted
		}
		return []*csi.Snapshot{s.snapEntry(h.volume, snap)}, nil
	}
	b, err := api.Backup(ctx, h.volume, h.name)
	if client.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, apiStatus(err, "read backup "+h.name+" of volume "+h.volume)
	}
	return []*csi.Snapshot{s.backupEntry(h.volume, b)}, nil
}

// listAll lists the snapshots of every volume, or of one.
func (s *controllerServer) listAll(ctx context.Context, volume string) ([]*csi.Snapshot, error) {
	api := s.d.api
	var volumes []string
	if volume != "" {
		if checkHandleName(volume) != nil {
			return nil, nil // no volume has such a name
		}
		volumes = []string{volume}
	} else {
		all, err := api.Volumes(ctx)
		if err != nil {
			return nil, apiStatus(err, "list volumes")
		}
		for _, v := range all {
			if v.State != volumeDeleting {
				volumes = append(volumes, v.Name)
			}
		}
	}
	var out []*csi.Snapshot
	for _, v := range volumes {
		snaps, err := api.SnapshotObjects(ctx, v)
		if client.IsNotFound(err) {
			continue // deleted since it was listed, or never was
		} else if err != nil {
			return nil, apiStatus(err, "list the snapshots of volume "+v)
		}
		for i := range snaps {
			if listedSnapshot(&snaps[i]) {
				out = append(out, s.snapEntry(v, &snaps[i]))
			}
		}
	}
	backupVolumes := volumes
	if volume == "" {
		var err error
		if backupVolumes, err = api.BackupVolumes(ctx); err != nil {
			return nil, apiStatus(err, "list backup volumes")
		}
	}
	for _, bv := range backupVolumes {
		backups, err := api.AllBackups(ctx, bv)
		if err != nil {
			return nil, apiStatus(err, "list the backups of volume "+bv)
		}
		for i := range backups {
			out = append(out, s.backupEntry(bv, &backups[i]))
		}
	}
	return out, nil
}

// listedSnapshot says whether a Longhorn snapshot is listed as a CSI
// snapshot of its own: not one being deleted, nor the snapshot a bak
// CSI snapshot was backed up from (that CSI snapshot is its backup).
func listedSnapshot(snap *client.SnapshotObject) bool {
	return !snap.MarkRemoved && snap.Labels[paramSnapshotType] != snapshotTypeBak
}

func (s *controllerServer) snapEntry(volume string, snap *client.SnapshotObject) *csi.Snapshot {
	o := snapshotOp{s: s, volume: volume, name: snap.Name, log: s.d.log.WithField("volume", volume)}
	return &csi.Snapshot{
		SnapshotId: snapshotHandle{kind: snapshotTypeSnap, volume: volume, name: snap.Name}.String(), SourceVolumeId: volume,
		SizeBytes: snap.RestoreSize, CreationTime: o.timestamp(snap.CreationTime), ReadyToUse: snap.ReadyToUse,
	}
}

// backupEntry is a backup as a CSI snapshot. Its size and times come from
// the backup target, which may be another cluster's: a size that does not
// parse is 0 (unknown, to the spec).
func (s *controllerServer) backupEntry(volume string, b *client.Backup) *csi.Snapshot {
	o := snapshotOp{s: s, volume: volume, name: b.Name, log: s.d.log.WithField("volume", volume)}
	size, err := strconv.ParseInt(b.VolumeSize, 10, 64)
	if err != nil || size < 0 {
		size = 0
	}
	return &csi.Snapshot{
		SnapshotId: snapshotHandle{kind: snapshotTypeBak, volume: volume, name: b.Name}.String(), SourceVolumeId: volume,
		SizeBytes: size, CreationTime: o.timestamp(b.SnapshotCreated), ReadyToUse: b.State == backupCompleted,
	}
}
