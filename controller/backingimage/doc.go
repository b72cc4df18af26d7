// Package backingimage holds the three backing image controllers: the
// BackingImage (copies on disks, lifecycle, clean-up, re-download), the
// BackingImageDataSource (the server that makes the first copy: download,
// upload, export from a volume) and the BackingImageManager (the server on
// each disk that holds and syncs the files). The servers themselves are
// started through backingimage/runner.
package backingimage
