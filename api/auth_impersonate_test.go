package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// Impersonation is honoured only for a caller the apiserver lets
// impersonate each part of it (the user, or the ServiceAccount it names,
// and each group), and the request is then authorized as the
// impersonated user, an authenticated one; a caller that may not is
// refused, never served as itself. Here the UI's account may impersonate
// bob and the group ops, alice (a user with rights of her own) may
// impersonate nobody, and bob may list volumes while mallory may not.
func TestImpersonationIsHonouredOnlyForACallerAllowedToImpersonate(t *testing.T) {
	const ui = "system:serviceaccount:longhorn-system:longhorn-ui"
	var asked []string
	f := &fakeReviews{allowAs: func(spec authorizationv1.SubjectAccessReviewSpec) bool {
		ra := spec.ResourceAttributes
		asked = append(asked, spec.User+" "+ra.Verb+" "+ra.Resource+" "+ra.Namespace+" "+ra.Name+" groups="+strings.Join(spec.Groups, ","))
		if ra.Verb == "impersonate" {
			return spec.User == ui && (ra.Resource == "users" && ra.Name == "bob" || ra.Resource == "groups" && ra.Name == "ops" ||
				ra.Resource == "serviceaccounts" && ra.Namespace == "team" && ra.Name == "deployer")
		}
		// The impersonated are authenticated users, as their own tokens'
		// would be (the fake TokenReview gives alice no such group).
		return slices.Contains([]string{"alice", "bob", "system:serviceaccount:team:deployer"}, spec.User) && ra.Verb == "list" &&
			(spec.User == "alice" || slices.Contains(spec.Groups, "system:authenticated"))
	}}
	for _, tc := range []struct {
		name    string
		token   string
		headers []string
		code    int
		says    string
		asks    []string
	}{
		{"alice as herself", "good", nil, 200, "", []string{"alice list volumes longhorn-system  groups=ops"}},
		{"alice may not impersonate", "good", []string{"Impersonate-User", "bob"}, 403, `alice may not impersonate users "bob"`,
			[]string{"alice impersonate users  bob groups=ops"}},
		{"the UI as bob", "ui", []string{"Impersonate-User", "bob"}, 200, "", []string{
			ui + " impersonate users  bob groups=", "bob list volumes longhorn-system  groups=system:authenticated"}},
		{"the UI as bob in ops", "ui", []string{"Impersonate-User", "bob", "Impersonate-Group", "ops"}, 200, "", []string{
			ui + " impersonate users  bob groups=", ui + " impersonate groups  ops groups=", "bob list volumes longhorn-system  groups=ops,system:authenticated"}},
		{"the UI as a user it may not impersonate", "ui", []string{"Impersonate-User", "mallory"}, 403, `longhorn-ui may not impersonate users "mallory"`,
			[]string{ui + " impersonate users  mallory groups="}},
		{"the UI as bob in a group it may not impersonate", "ui", []string{"Impersonate-User", "bob", "Impersonate-Group", "system:masters"}, 403,
			`may not impersonate groups "system:masters"`, []string{ui + " impersonate users  bob groups=", ui + " impersonate groups  system:masters groups="}},
		{"the UI as a ServiceAccount", "ui", []string{"Impersonate-User", "system:serviceaccount:team:deployer"}, 200, "", []string{
			ui + " impersonate serviceaccounts team deployer groups=",
			"system:serviceaccount:team:deployer list volumes longhorn-system  groups=system:serviceaccounts,system:serviceaccounts:team,system:authenticated"}},
		{"a group without a user", "ui", []string{"Impersonate-Group", "ops"}, 400, "need Impersonate-User", nil},
		{"the UI as bob, without a token", "", []string{"Impersonate-User", "bob"}, 401, "bearer token", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t)
			s.server.EnableKubernetesAuth(f.client(), testNamespace)
			asked = nil
			req := httptest.NewRequest("GET", "/v1/volumes", nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Add(tc.headers[i], tc.headers[i+1])
			}
			rec := httptest.NewRecorder()
			s.handler.ServeHTTP(rec, req)
			var answer struct{ Message string }
			_ = json.Unmarshal(rec.Body.Bytes(), &answer)
			if rec.Code != tc.code || !strings.Contains(answer.Message, tc.says) {
				t.Errorf("%d %s, want %d saying %q", rec.Code, rec.Body, tc.code, tc.says)
			}
			if strings.Join(asked, "|") != strings.Join(tc.asks, "|") {
				t.Errorf("asked %q, want %q", asked, tc.asks)
			}
		})
	}
}

// A granted impersonation is remembered as a grant is; a refused one as
// a refusal is, so a caller sending it again costs no review.
func TestImpersonationIsCachedAsGrantsAndRefusalsAre(t *testing.T) {
	s := newTestServer(t)
	f := &fakeReviews{allowAs: func(spec authorizationv1.SubjectAccessReviewSpec) bool {
		ra := spec.ResourceAttributes
		return ra.Verb != "impersonate" || ra.Name == "bob"
	}}
	s.server.EnableKubernetesAuth(f.client(), testNamespace)
	as := func(user string) int {
		req := httptest.NewRequest("GET", "/v1/volumes", nil)
		req.Header.Set("Authorization", "Bearer ui")
		req.Header.Set("Impersonate-User", user)
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := 0; i < 3; i++ {
		if code := as("bob"); code != http.StatusOK {
			t.Fatalf("as bob: %d", code)
		}
		if code := as("mallory"); code != http.StatusForbidden {
			t.Fatalf("as mallory: %d", code)
		}
	}
	if got := f.take(); len(got) != 3 {
		t.Errorf("reviews %q: want bob's impersonation, bob's list and mallory's impersonation once each", got)
	}
}
