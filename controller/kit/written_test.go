package kit

import "testing"

func TestWritten(t *testing.T) {
	var w Written
	if w.Stale("ns/a", "5") {
		t.Fatal("nothing written, yet stale")
	}
	w.Remember("ns/a", "7")
	w.Remember("ns/a", "6") // an older write's answer read late changes nothing
	for _, tc := range []struct {
		rv    string
		stale bool
	}{
		{"5", true},
		{"6", true},
		{"not-a-number", false}, // never taken for stale, and the memory ends
		{"6", false},
	} {
		if got := w.Stale("ns/a", tc.rv); got != tc.stale {
			t.Fatalf("cached at %s: stale %v, want %v", tc.rv, got, tc.stale)
		}
	}

	w.Remember("ns/b", "10")
	if !w.Stale("ns/b", "9") || w.Stale("ns/c", "1") {
		t.Fatal("keys mixed up")
	}
	if w.Stale("ns/b", "11") || w.Stale("ns/b", "9") {
		t.Fatal("a newer copy (someone else's write) must end the memory")
	}
	w.Remember("ns/b", "12")
	w.Forget("ns/b")
	if w.Stale("ns/b", "1") {
		t.Fatal("forgotten, yet stale")
	}
	w.Remember("ns/b", "") // an unparsable answer is not remembered
	if w.Stale("ns/b", "1") {
		t.Fatal("an empty resourceVersion was remembered")
	}
	// Versions past 64 bits compare as apimachinery compares them.
	w.Remember("ns/d", "18446744073709551616")
	if !w.Stale("ns/d", "18446744073709551615") || w.Stale("ns/d", "18446744073709551617") {
		t.Fatal("versions past 64 bits")
	}
}
