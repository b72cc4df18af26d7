package types

import "testing"

func TestParseDataSource(t *testing.T) {
	for _, c := range []struct {
		in   string
		want DataSource
		ok   bool
	}{
		{"vol://db", DataSource{Volume: "db"}, true},
		{"snap://db/first", DataSource{Volume: "db", Snapshot: "first"}, true},
		{"snap://db/Snap-1.x", DataSource{Volume: "db", Snapshot: "Snap-1.x"}, true},
		{"", DataSource{}, false},
		{"db", DataSource{}, false},
		{"vol://", DataSource{}, false},
		{"vol://db/first", DataSource{}, false},
		{"vol://DB", DataSource{}, false},
		{"snap://db", DataSource{}, false},
		{"snap://db/", DataSource{}, false},
		{"snap:///first", DataSource{}, false},
		{"snap://db/a/b", DataSource{}, false},
		{"snap://db/volume-head", DataSource{}, false},
		{"bak://db/backup-1", DataSource{}, false},
	} {
		got, err := ParseDataSource(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseDataSource(%q) = %+v, %v; want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
		if c.ok && got.String() != c.in {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), c.in)
		}
	}
}
