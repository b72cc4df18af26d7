package api

import (
	"testing"
)

// The streams a notice wakes share one encoding of the change: the list
// is rendered once per notice and base URL, again for a stream's first
// list (always fresh) and after the next notice.
func TestStreamsShareOneEncodingPerChange(t *testing.T) {
	calls := 0
	h := &hub{subs: map[chan struct{}]struct{}{}, list: func(base string) (any, error) {
		calls++
		return map[string]any{"base": base, "n": calls}, nil
	}}
	first, err := h.encode("http://a", true)
	if err != nil {
		t.Fatal(err)
	}
	h.notify()
	for i := 0; i < 3; i++ {
		if _, err := h.encode("http://a", false); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 {
		t.Errorf("three streams after one notice rendered the list %d times in all, want once after the first", calls-1)
	}
	e, _ := h.encode("http://a", false)
	if e.sum == first.sum {
		t.Error("the encoding after a notice is the one from before it")
	}
	if _, err := h.encode("http://b", false); err != nil || calls != 3 {
		t.Errorf("another base URL: %d renders, %v", calls, err)
	}
	if _, err := h.encode("http://a", true); err != nil || calls != 4 {
		t.Errorf("a stream's first list is rendered fresh: %d renders, %v", calls, err)
	}
}
