package replica

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSnapshotLabelsBounded(t *testing.T) {
	r, err := Create(filepath.Join(t.TempDir(), "r"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	many := map[string]string{}
	for i := 0; i <= MaxLabels; i++ {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{many, fmt.Sprintf("at most %d", MaxLabels)},
		{map[string]string{strings.Repeat("k", MaxLabelKey+1): "v"}, fmt.Sprintf("key of 1 to %d", MaxLabelKey)},
		{map[string]string{"": "v"}, "key of 1 to"},
		{map[string]string{"a b": "v"}, "letters, digits"},
		{map[string]string{"k": strings.Repeat("v", MaxLabelValue+1)}, fmt.Sprintf("at most %d bytes", MaxLabelValue)},
		{map[string]string{"k": "\xff"}, "UTF-8"},
	} {
		err := r.CreateSnapshot("s", true, time.Now(), tc.labels)
		if err == nil || !strings.Contains(err.Error(), "labels") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("labels %.60v: %v, want an error saying %q", tc.labels, err, tc.want)
		}
	}
	if r.HasSnapshot("s") {
		t.Fatal("a snapshot with refused labels was made")
	}
	ok := map[string]string{"RecurringJob": "hourly", "longhorn.io/owner": strings.Repeat("v", MaxLabelValue)}
	if err := r.CreateSnapshot("s", true, time.Now(), ok); err != nil {
		t.Fatal(err)
	}
}
