package datastore

import (
	"reflect"
	"strings"
	"testing"
)

const (
	defaultGroup = "recurring-job-group.longhorn.io/default"
	jobA         = "recurring-job.longhorn.io/a"
	groupGold    = "recurring-job-group.longhorn.io/gold"
)

func TestFixupRecurringJobLabels(t *testing.T) {
	cases := []struct {
		name        string
		in          map[string]string
		want        map[string]string
		wantChanged bool
	}{
		{"a volume without labels joins the default group", nil, map[string]string{defaultGroup: "enabled"}, true},
		{"unrelated labels do not count as a selection", map[string]string{"app": "db"}, map[string]string{"app": "db", defaultGroup: "enabled"}, true},
		{"a volume with a job label leaves the default group", map[string]string{jobA: "enabled", defaultGroup: "enabled"}, map[string]string{jobA: "enabled"}, true},
		{"a volume with a group label leaves the default group", map[string]string{groupGold: "enabled", defaultGroup: "enabled"}, map[string]string{groupGold: "enabled"}, true},
		{"a volume in only the default group stays", map[string]string{defaultGroup: "enabled"}, map[string]string{defaultGroup: "enabled"}, false},
		{"a volume with its own job needs no default", map[string]string{jobA: "enabled"}, map[string]string{jobA: "enabled"}, false},
		{"the claim's source label selects nothing", map[string]string{"recurring-job.longhorn.io/source": "enabled"},
			map[string]string{"recurring-job.longhorn.io/source": "enabled", defaultGroup: "enabled"}, true},
		{"a drill's scratch volume joins no group", map[string]string{"longhorn.io/backup-verify-scratch": "b1"},
			map[string]string{"longhorn.io/backup-verify-scratch": "b1"}, false},
		{"a drill's scratch volume leaves the default group", map[string]string{"longhorn.io/backup-verify-scratch": "b1", defaultGroup: "enabled"},
			map[string]string{"longhorn.io/backup-verify-scratch": "b1"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before map[string]string
			if c.in != nil {
				before = copyLabels(c.in)
			}
			got, changed := FixupRecurringJobLabels(c.in)
			if changed != c.wantChanged || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v (changed %v), want %v (changed %v)", got, changed, c.want, c.wantChanged)
			}
			if c.in != nil && !reflect.DeepEqual(c.in, before) {
				t.Fatalf("the input map was modified: %v", c.in)
			}
		})
	}
}

func TestRecurringJobSelector(t *testing.T) {
	labels := map[string]string{groupGold: "enabled", jobA: "enabled", "recurring-job.longhorn.io/off": "disabled", "app": "x", "recurring-job-group.longhorn.io/a": "enabled",
		"recurring-job.longhorn.io/source": "enabled"}
	want := []RecurringJobSelectorItem{{Name: "a"}, {Name: "a", IsGroup: true}, {Name: "gold", IsGroup: true}}
	if got := RecurringJobSelector(labels); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestParseRecurringJobSelector(t *testing.T) {
	cases := []struct {
		name  string
		param string
		want  []RecurringJobSelectorItem
		err   string
	}{
		{"empty parameter selects nothing", "", nil, ""},
		{"jobs and groups", `[{"name":"snap","isGroup":false},{"name":"gold","isGroup":true}]`,
			[]RecurringJobSelectorItem{{Name: "snap"}, {Name: "gold", IsGroup: true}}, ""},
		{"isGroup may be left out", `[{"name":"snap"}]`, []RecurringJobSelectorItem{{Name: "snap"}}, ""},
		{"malformed JSON is refused", `[{"name":"snap"`, nil, "must be a JSON list"},
		{"an object instead of a list is refused", `{"name":"snap"}`, nil, "must be a JSON list"},
		{"unknown keys are refused", `[{"name":"snap","group":true}]`, nil, "unknown field"},
		{"an empty name is refused", `[{"name":""}]`, nil, "recurringJobSelector[0].name"},
		{"a name that cannot be a label is refused", `[{"name":"a b"}]`, nil, "recurringJobSelector[0].name"},
		{"trailing data is refused", `[] []`, nil, "unexpected data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseRecurringJobSelector(c.param)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("want an error saying %q, got %v", c.err, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
