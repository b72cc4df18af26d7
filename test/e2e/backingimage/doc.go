// Package backingimage holds the end-to-end tests of the BackingImage
// family: downloads, uploads, exports from volumes, qcow2, the data source
// and manager servers as processes and as pods, disks that fail or disappear,
// and their metrics.
package backingimage
