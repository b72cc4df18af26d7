package framework

import (
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/internal/testtime"
)

// ScrapeMetrics reads the daemon's /metrics into a map from series, as
// the text format writes it (name{label="value",...}, labels sorted), to
// value.
func (e *APIEnv) ScrapeMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	return ScrapeMetricsAt(t, e.Base)
}

// ScrapeMetricsAt is scrapeMetrics of the daemon whose API is at base.
func ScrapeMetricsAt(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// Series names a series as the text format writes it; labels are pairs
// of name and value.
func Series(name string, labels ...string) string {
	if len(labels) == 0 {
		return name
	}
	type pair struct{ k, v string }
	var pairs []pair
	for i := 0; i+1 < len(labels); i += 2 {
		pairs = append(pairs, pair{labels[i], labels[i+1]})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].k < pairs[j].k })
	var b strings.Builder
	b.WriteString(name + "{")
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.k + `="` + p.v + `"`)
	}
	b.WriteString("}")
	return b.String()
}

// SeriesWith lists the series that carry label="value".
func SeriesWith(m map[string]float64, label, value string) []string {
	var out []string
	for s := range m {
		if strings.Contains(s, label+`="`+value+`"`) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// ExpectSeries compares the wanted series with m and says what differs,
// "" when nothing does.
func ExpectSeries(m map[string]float64, want map[string]float64) string {
	var diffs []string
	for s, v := range want {
		got, ok := m[s]
		switch {
		case !ok:
			diffs = append(diffs, s+" missing")
		case got != v:
			diffs = append(diffs, s+" = "+strconv.FormatFloat(got, 'g', -1, 64)+", want "+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

// EventuallyAgree polls check every 200ms for up to timeout until it
// returns no difference, and fails with the last one.
func EventuallyAgree(t *testing.T, timeout time.Duration, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(testtime.Scale(timeout))
	for {
		diff := check()
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, diff)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
