// Package snapshot holds the end-to-end tests of the Snapshot custom
// resource: admission, taking in the engine's snapshots, object rules,
// deleting the newest, and the scale benchmarks.
package snapshot
