package crds_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclient "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// A SystemRestore's requester is whoever makes it
// (policies/system-restore-requester.yaml): the restore creates its
// objects with that user's rights, so a user who records another, a
// group or extra they do not have, or no one, is refused, as is an
// update that changes the record. A user recording themselves, or
// fewer groups than they have, passes; the manager's own account may
// record the API's caller.
func TestASystemRestoreRecordsWhoMakesIt(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	// No manager runs here; the apiserver alone answers. The namespace is
	// labelled as a manager's, so the mutating policies act in it.
	ns := cluster.NewNamespace(t)
	ctx := context.Background()
	kube := cluster.KubeClient(t)
	const tenant = "tenant"
	manager := "system:serviceaccount:" + ns + ":longhorn-service-account"
	role, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: tenant}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"longhorn.io"}, Resources: []string{"systemrestores"}, Verbs: []string{"create", "get", "update"}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: tenant},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: tenant},
			{Kind: rbacv1.ServiceAccountKind, Name: "longhorn-service-account", Namespace: ns}},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	as := func(user string, groups []string, extra map[string][]string) lhclient.Interface {
		cfg := rest.CopyConfig(cluster.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups, Extra: extra}
		return lhclient.NewForConfigOrDie(cfg)
	}
	tenantGroups := []string{"dev", "system:authenticated"}
	tenantExtra := map[string][]string{"scopes": {"restore"}}
	tenantClient := as(tenant, tenantGroups, tenantExtra)
	restore := func(name string, req *longhorn.SystemRestoreRequester) *longhorn.SystemRestore {
		return &longhorn.SystemRestore{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: longhorn.SystemRestoreSpec{SystemBackup: "sb", Requester: req}}
	}
	var rbacInForce bool
	for _, tc := range []struct {
		name   string
		client lhclient.Interface
		req    *longhorn.SystemRestoreRequester
		// refused: the policy's refusal; else the create passes.
		refused bool
	}{
		{"the tenant recording themselves", tenantClient, &longhorn.SystemRestoreRequester{Username: tenant, Groups: tenantGroups, Extra: tenantExtra}, false},
		{"the tenant recording fewer groups and no extra", tenantClient, &longhorn.SystemRestoreRequester{Username: tenant, Groups: []string{"dev"}}, false},
		// The mutating policy (admission/system-restore-requester.yaml)
		// records the maker; the row below checks what it recorded.
		{"the tenant recording no one", tenantClient, nil, false},
		{"the tenant recording an admin", tenantClient, &longhorn.SystemRestoreRequester{Username: "admin", Groups: []string{"system:masters"}}, true},
		{"the tenant recording a group they are not in", tenantClient, &longhorn.SystemRestoreRequester{Username: tenant, Groups: []string{"dev", "system:masters"}}, true},
		{"the tenant recording extra they do not have", tenantClient, &longhorn.SystemRestoreRequester{Username: tenant, Extra: map[string][]string{"scopes": {"all"}}}, true},
		{"the tenant recording another uid", tenantClient, &longhorn.SystemRestoreRequester{Username: tenant, UID: "someone-else"}, true},
		{"the manager recording the API's caller", as(manager, []string{"system:serviceaccounts", "system:authenticated"}, nil), &longhorn.SystemRestoreRequester{Username: tenant, Groups: []string{"dev"}}, false},
	} {
		name := strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), "'", ""))
		create := func() error {
			_, err := tc.client.LonghornV1beta2().SystemRestores(ns).Create(ctx, restore(name, tc.req), metav1.CreateOptions{})
			return err
		}
		if !rbacInForce {
			// The first row passes once the tenant's RoleBinding is in force.
			waitAllowed(t, create)
			rbacInForce = true
			continue
		}
		err := create()
		if tc.refused && (err == nil || !strings.Contains(err.Error(), "rule system-restore-requester")) {
			t.Errorf("%s: %v, want refused naming the rule", tc.name, err)
		}
		if !tc.refused && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}

	// A restore made without a requester records its maker, as the
	// apiserver authenticated them.
	filled, err := tenantClient.LonghornV1beta2().SystemRestores(ns).Get(ctx, "the-tenant-recording-no-one", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := filled.Spec.Requester; r == nil || r.Username != tenant || !sameSet(r.Groups, tenantGroups) || !slices.Equal(r.Extra["scopes"], tenantExtra["scopes"]) {
		t.Errorf("a restore made without a requester recorded %+v, want %s with groups %v and extra %v", r, tenant, tenantGroups, tenantExtra)
	}

	// Where the mutating policy does not act (a namespace not labelled as
	// a manager's, or a cluster older than 1.36), a restore without a
	// requester is refused, saying what is missing.
	plain := cluster.NewPlainNamespace(t)
	if _, err := lhclient.NewForConfigOrDie(cluster.Config).LonghornV1beta2().SystemRestores(plain).Create(ctx, restore("no-requester", nil), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "rule system-restore-requester") {
		t.Errorf("a restore without a requester where nothing records it: %v, want refused naming the rule", err)
	}

	// The record does not change; the rest of the spec may.
	sr, err := tenantClient.LonghornV1beta2().SystemRestores(ns).Get(ctx, "the-tenant-recording-fewer-groups-and-no-extra", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changed := sr.DeepCopy()
	changed.Spec.Requester.Groups = tenantGroups
	if _, err := tenantClient.LonghornV1beta2().SystemRestores(ns).Update(ctx, changed, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.requester: may not change") {
		t.Errorf("an update of the requester: %v, want refused", err)
	}
	dropped := sr.DeepCopy()
	dropped.Spec.Requester = nil
	if _, err := tenantClient.LonghornV1beta2().SystemRestores(ns).Update(ctx, dropped, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.requester: may not change") {
		t.Errorf("an update dropping the requester: %v, want refused", err)
	}
	kept := sr.DeepCopy()
	kept.Spec.SystemBackup = "another"
	if _, err := tenantClient.LonghornV1beta2().SystemRestores(ns).Update(ctx, kept, metav1.UpdateOptions{}); err != nil {
		t.Errorf("an update keeping the requester: %v", err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
