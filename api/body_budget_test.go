package api

import (
	"net/http"
	"strings"
	"testing"
)

// Refusing a request never costs more than reading it: a 1 MiB name is
// refused with a message that names the field and quotes a prefix of the
// value, not the whole of it.
func TestARefusalDoesNotEchoAHugeValue(t *testing.T) {
	s := newTestServer(t)
	name := strings.Repeat("a", 1<<20-64)
	code, _, body := s.do(t, "POST", "/v1/volumes", `{"name":"`+name+`","size":"1Gi"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "name: ") || !strings.Contains(body, "characters) is longer than") {
		t.Fatalf("%d %.200s", code, body)
	}
	if len(body) > 1024 {
		t.Errorf("the refusal is %d bytes long", len(body))
	}
	if got := truncateMessage(strings.Repeat("é", maxErrorMessage)); len(got) > maxErrorMessage+64 || !strings.HasSuffix(got, "more bytes)") {
		t.Errorf("a long message cut to %d bytes: %.40s...%s", len(got), got, got[len(got)-30:])
	}
}

func TestBodyCost(t *testing.T) {
	for _, tc := range []struct {
		length int64
		want   int64
	}{
		{-1, maxBodyBytes * bodyCostFactor}, // unannounced: the largest
		{0, minBodyCost * bodyCostFactor},
		{100, minBodyCost * bodyCostFactor},
		{1 << 19, (1 << 19) * bodyCostFactor},
		{10 << 20, maxBodyBytes * bodyCostFactor}, // refused past the cap anyway
	} {
		r, _ := http.NewRequest("POST", "/", nil)
		r.ContentLength = tc.length
		if got := bodyCost(r); got != tc.want {
			t.Errorf("length %d: cost %d, want %d", tc.length, got, tc.want)
		}
	}
}
