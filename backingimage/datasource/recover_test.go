package datasource

import (
	"context"
	"testing"
)

// panickingExporter panics opening any snapshot, as a bug would.
type panickingExporter struct{}

func (panickingExporter) OpenSnapshot(context.Context, string, string) (SnapshotReader, error) {
	var r SnapshotReader
	return r, r.Close() // a nil interface: a runtime panic
}

// A panic in the data source's work fails the file with an internal
// error instead of ending the process.
func TestWorkPanicFailsTheFile(t *testing.T) {
	_, c := start(t, Config{SourceType: "export-from-volume", Parameters: exportParams("raw"), Exporter: panickingExporter{}})
	wantFailed(t, waitState(t, c, 10e9), "internal error")
}
