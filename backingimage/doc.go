// Package backingimage holds what backing images share on disk: the names
// and folders of their files, the disk identity check, and the one way a
// file is written (to a temporary file, hashed as it is written, checked
// against the expected SHA512, fsynced, then renamed into place), so no
// half-written file is ever taken for a complete one.
//
// The two servers live in the subpackages, each with its Go client:
//
//   - datasource: the HTTP server (`longhorn-manager
//     backing-image-data-source`) that prepares a backing image's first
//     file in <disk>/tmp/<name>-<uuid>/ by download, upload or export from
//     a volume, reports it on GET /v1/file and hands it over.
//   - manager: the gRPC service (`longhorn-manager backing-image-manager`,
//     backingimage/rpc/manager.proto) that owns <disk>/backing-images/ on
//     one disk: Fetch from the data source, Sync from a peer, Send to
//     peers (three at once at most), Get, List, Delete, VersionGet, Watch.
//
// # How the controllers drive them (the next step)
//
// The controllers never start a server themselves: they go through one
// interface, roughly
//
//	type ServerRunner interface {
//		// Ensure starts the server for obj (a data source or a manager)
//		// unless it runs, and returns its address once it answers.
//		Ensure(ctx context.Context, obj ServerSpec) (address string, err error)
//		Stop(ctx context.Context, kind, name string) error
//		// Logs is the server's last lines, recorded in a failed status.
//		Logs(ctx context.Context, kind, name string, lines int) (string, error)
//	}
//
// with two implementations: in a cluster, a pod of the manager image on
// the object's node with the disk mounted at the same path (the address
// is the pod IP); on the local control plane, a child process of the
// daemon's own binary running the same subcommand on a free 127.0.0.1
// port. The server's flags are the same in both, so everything past
// Ensure (the data source client polling GET /v1/file every 3 s, the
// manager client's Watch stream, Fetch, Sync and Delete) does not know
// which one runs it. The BackingImage controller sets status.uuid first,
// then creates the data source; the manager controller calls Fetch on the
// data source's disk once the data source is ready-for-transfer, then
// sets spec.fileTransferred, and Sync on every other disk from a manager
// whose file is ready. Delete is refused while InUse (the replica side's
// hook) says a replica uses the file.
package backingimage
