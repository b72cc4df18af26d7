package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeReviews answers TokenReviews (the token "good" is alice) and
// SubjectAccessReviews (allowed when allow says so), and records them.
type fakeReviews struct {
	mu      sync.Mutex
	tokens  int
	reviews []string
	allow   func(a *authorizationv1.ResourceAttributes) bool
	// allowAs, when set, decides in place of allow, knowing who is asked
	// about.
	allowAs func(spec authorizationv1.SubjectAccessReviewSpec) bool
	// delay, when set, is how long a TokenReview takes.
	delay time.Duration
}

func (f *fakeReviews) client() *kubefake.Clientset {
	c := kubefake.NewSimpleClientset()
	c.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		tr := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		f.mu.Lock()
		f.tokens++
		f.mu.Unlock()
		time.Sleep(f.delay)
		switch tr.Spec.Token {
		case "good":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice", Groups: []string{"ops"}}}
		case "attacher":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:longhorn-system:longhorn-csi-attacher"}}
		case "ui":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:longhorn-system:longhorn-ui"}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sar := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		f.mu.Lock()
		defer f.mu.Unlock()
		if ra := sar.Spec.ResourceAttributes; ra != nil {
			res := ra.Resource
			if ra.Subresource != "" {
				res += "/" + ra.Subresource
			}
			f.reviews = append(f.reviews, strings.TrimSpace(fmt.Sprintf("%s %s/%s %s %s", ra.Verb, ra.Group, res, ra.Namespace, ra.Name)))
			if f.allowAs != nil {
				sar.Status.Allowed = f.allowAs(sar.Spec)
			} else {
				sar.Status.Allowed = f.allow(ra)
			}
		} else {
			f.reviews = append(f.reviews, sar.Spec.NonResourceAttributes.Verb+" "+sar.Spec.NonResourceAttributes.Path)
		}
		return true, sar, nil
	})
	return c
}

func (f *fakeReviews) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.reviews
	f.reviews = nil
	return out
}

// Every route asks for the verb and resource it touches.
func TestRouteAccessOfEveryRoute(t *testing.T) {
	s := newTestServer(t)
	f := &fakeReviews{allow: func(*authorizationv1.ResourceAttributes) bool { return false }}
	ns := " " + testNamespace
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/v1/recurringjobs", "list longhorn.io/recurringjobs" + ns},
		{"POST", "/v1/recurringjobs", "create longhorn.io/recurringjobs" + ns},
		{"GET", "/v1/recurringjobs/j", "get longhorn.io/recurringjobs" + ns + " j"},
		{"PUT", "/v1/recurringjobs/j", "update longhorn.io/recurringjobs" + ns + " j"},
		{"DELETE", "/v1/recurringjobs/j", "delete longhorn.io/recurringjobs" + ns + " j"},
		{"GET", "/v1/volumes", "list longhorn.io/volumes" + ns},
		{"POST", "/v1/volumes", "create longhorn.io/volumes" + ns},
		{"GET", "/v1/volumes/v", "get longhorn.io/volumes" + ns + " v"},
		{"DELETE", "/v1/volumes/v", "delete longhorn.io/volumes" + ns + " v"},
		{"POST", "/v1/volumes/v?action=attach", "update longhorn.io/volumes" + ns + " v|update longhorn.io/volumes/attach" + ns + " v"},
		{"POST", "/v1/volumes/v?action=snapshotDelete", "update longhorn.io/volumes" + ns + " v|update longhorn.io/volumes/snapshotDelete" + ns + " v"},
		{"POST", "/v1/volumes/v?action=snapshotList", "get longhorn.io/volumes" + ns + " v"},
		{"POST", "/v1/volumes/v?action=recurringJobList", "get longhorn.io/volumes" + ns + " v"},
		{"GET", "/v1/settings", "list longhorn.io/settings" + ns},
		{"GET", "/v1/settings/s", "get longhorn.io/settings" + ns + " s"},
		{"PUT", "/v1/settings/s", "update longhorn.io/settings" + ns + " s"},
		{"GET", "/v1/backupvolumes", "list longhorn.io/backupvolumes" + ns},
		{"GET", "/v1/backupvolumes/b", "get longhorn.io/backupvolumes" + ns + " b"},
		{"POST", "/v1/backupvolumes/b?action=backupList", "get longhorn.io/backupvolumes" + ns + " b"},
		{"POST", "/v1/backupvolumes/b?action=backupDelete", "delete longhorn.io/backups" + ns},
		{"DELETE", "/v1/backupvolumes/b", "delete longhorn.io/backupvolumes" + ns + " b"},
		{"POST", "/v1/backupvolumes/b?action=backupVolumeSync", "update longhorn.io/backupvolumes" + ns + " b|update longhorn.io/backupvolumes/backupVolumeSync" + ns + " b"},
		{"GET", "/v1/nodes", "list longhorn.io/nodes" + ns},
		{"GET", "/v1/nodes/n", "get longhorn.io/nodes" + ns + " n"},
		{"GET", "/v1/backingimages", "list longhorn.io/backingimages" + ns},
		{"POST", "/v1/backingimages", "create longhorn.io/backingimages" + ns},
		{"GET", "/v1/backingimages/i", "get longhorn.io/backingimages" + ns + " i"},
		{"DELETE", "/v1/backingimages/i", "delete longhorn.io/backingimages" + ns + " i"},
		{"POST", "/v1/backingimages/i?action=upload&size=1", "update longhorn.io/backingimages" + ns + " i|update longhorn.io/backingimages/upload" + ns + " i"},
		{"POST", "/v1/backingimages/i?action=backingImageCleanup", "update longhorn.io/backingimages" + ns + " i|update longhorn.io/backingimages/backingImageCleanup" + ns + " i"},
		{"GET", "/v1/ws/volumes", "list longhorn.io/volumes" + ns},
		{"GET", "/v1/ws/1s/nodes", "list longhorn.io/nodes" + ns},
		{"GET", "/metrics", "get /metrics"},
	} {
		// Each row with caches of its own: a refusal is remembered.
		s.server.EnableKubernetesAuth(f.client(), testNamespace)
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer good")
		if strings.Contains(tc.path, "upload") {
			req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
		} else {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		got := f.take()
		// An action asks update on the object, then on the subresource
		// named after it (the narrow grant).
		if rec.Code != http.StatusForbidden || strings.Join(got, "|") != tc.want {
			t.Errorf("%s %s: %d %v, want 403 after asking %q", tc.method, tc.path, rec.Code, got, tc.want)
		}
	}
	// The open paths ask nothing.
	for _, path := range []string{"/healthz", "/readyz"} {
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 || len(f.take()) != 0 {
			t.Errorf("%s: %d", path, rec.Code)
		}
	}
}

// A token and a grant are asked once per TTL, and so is a refused token;
// a refused access once per its shorter TTL (a new RoleBinding applies
// within it).
func TestAuthCachesTokensGrantsAndRefusals(t *testing.T) {
	s := newTestServer(t)
	f := &fakeReviews{allow: func(a *authorizationv1.ResourceAttributes) bool { return a.Resource == "volumes" }}
	s.server.EnableKubernetesAuth(f.client(), testNamespace)
	now := time.Now()
	s.server.auth.now = func() time.Time { return now }
	get := func(path, token string) int {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := 0; i < 3; i++ {
		if code := get("/v1/volumes", "good"); code != 200 {
			t.Fatalf("allowed list: %d", code)
		}
		if code := get("/v1/nodes", "good"); code != 403 {
			t.Fatalf("refused list: %d", code)
		}
		if code := get("/v1/volumes", "bad"); code != 401 {
			t.Fatalf("bad token: %d", code)
		}
	}
	if got := f.take(); len(got) != 2 {
		t.Errorf("reviews %v: want one for the grant and one for the refusal", got)
	}
	now = now.Add(authAccessRefusalTTL)
	if code := get("/v1/nodes", "good"); code != 403 || len(f.take()) != 1 {
		t.Errorf("a refused access after its TTL: %d, want it asked again", code)
	}
	if f.tokens != 2 {
		t.Errorf("%d TokenReviews, want one for the good token and one for the bad", f.tokens)
	}
	now = now.Add(authCacheTTL)
	if code := get("/v1/volumes", "good"); code != 200 || f.tokens != 3 || len(f.take()) != 1 {
		t.Errorf("after the TTL: %d, %d TokenReviews", code, f.tokens)
	}
	if code := get("/v1/volumes", "bad"); code != 401 || f.tokens != 4 {
		t.Errorf("a refused token after its TTL: %d, %d TokenReviews, want it asked again", code, f.tokens)
	}
}

// A flood of new tokens costs at most the review budget: one caller's
// flood at most its own budget, so others are still served; a flood from
// many callers at most the API's. Beyond them the API answers 429 with
// Retry-After and asks the apiserver nothing, while a token it knows is
// still served from its cache.
func TestAFloodOfNewTokensIsBoundedByTheReviewBudget(t *testing.T) {
	s := newTestServer(t)
	f := &fakeReviews{allow: func(*authorizationv1.ResourceAttributes) bool { return true }}
	s.server.EnableKubernetesAuth(f.client(), testNamespace)
	// The clock stands still: each budget is its burst, no refill.
	now := time.Now()
	s.server.auth.now = func() time.Time { return now }
	get := func(token, from string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/v1/volumes", nil)
		req.RemoteAddr = from + ":40000"
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec
	}
	reviews := func() int { f.mu.Lock(); defer f.mu.Unlock(); return f.tokens }
	flood := func(n int, from func(i int) string) (refused, tooMany int) {
		var wg sync.WaitGroup
		var r, m atomic.Int32
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				rec := get(fmt.Sprintf("bad-%d-%s", i, from(i)), from(i))
				switch rec.Code {
				case http.StatusTooManyRequests:
					if rec.Header().Get("Retry-After") == "" {
						t.Errorf("429 without Retry-After")
					}
					m.Add(1)
				case http.StatusUnauthorized:
					r.Add(1)
				default:
					t.Errorf("bad token %d: %d", i, rec.Code)
				}
			}(i)
		}
		wg.Wait()
		return int(r.Load()), int(m.Load())
	}
	if rec := get("good", "10.0.0.9"); rec.Code != 200 {
		t.Fatalf("the good token: %d", rec.Code)
	}
	// One caller: its own budget.
	refused, tooMany := flood(1000, func(int) string { return "10.0.0.1" })
	if refused != authCallerReviewBurst || tooMany != 1000-authCallerReviewBurst || reviews() != 1+authCallerReviewBurst {
		t.Errorf("one caller's flood: %d refused, %d answered 429, %d TokenReviews", refused, tooMany, reviews())
	}
	if rec := get("good", "10.0.0.1"); rec.Code != 200 {
		t.Errorf("a known token from the flooding address: %d", rec.Code)
	}
	// Another caller's new token is still checked.
	if rec := get("other", "10.0.0.2"); rec.Code != http.StatusUnauthorized {
		t.Errorf("a new token from another address during the flood: %d, want it checked (401)", rec.Code)
	}
	// Many callers: the API's budget, of which 1+5+1 are spent.
	spent := reviews()
	refused, tooMany = flood(1000, func(i int) string { return fmt.Sprintf("10.1.%d.%d", i/250, i%250) })
	if refused != authReviewBurst-spent || tooMany != 1000-(authReviewBurst-spent) || reviews() != authReviewBurst {
		t.Errorf("many callers' flood: %d refused, %d answered 429, %d TokenReviews in all", refused, tooMany, reviews())
	}
	if rec := get("good", "10.0.0.9"); rec.Code != 200 {
		t.Errorf("the known token after the floods: %d", rec.Code)
	}
}

// One user's refused requests, each for another object, cost at most the
// user's budget of refusals: past it the API answers 429 without asking
// the apiserver, so the reviews' shared rate stays for the others (the
// CSI attacher's calls among them), and a request the apiserver grants
// costs the user nothing of it. The budget refills with time.
func TestOneUsersRefusalsAreBudgeted(t *testing.T) {
	s := newTestServer(t)
	f := &fakeReviews{allow: func(a *authorizationv1.ResourceAttributes) bool { return a.Resource == "volumes" && a.Verb != "delete" }}
	s.server.EnableKubernetesAuth(f.client(), testNamespace)
	now := time.Now()
	s.server.auth.now = func() time.Time { return now }
	do := func(method, path, token string) int {
		req := httptest.NewRequest(method, path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec.Code
	}
	forbidden, tooMany := 0, 0
	for i := 0; i < 200; i++ {
		// An action asks two reviews: update on the image, then on its
		// subresource; both are refused.
		switch code := do("POST", fmt.Sprintf("/v1/backingimages/i%d?action=backingImageCleanup", i), "good"); code {
		case http.StatusForbidden:
			forbidden++
		case http.StatusTooManyRequests:
			tooMany++
		default:
			t.Fatalf("refused action %d: %d", i, code)
		}
	}
	if asked := len(f.take()); asked != authUserRefusalBurst || forbidden != authUserRefusalBurst/2 || tooMany != 200-authUserRefusalBurst/2 {
		t.Errorf("one user's flood of refused actions: %d reviews, %d answered 403, %d 429; want %d reviews", asked, forbidden, tooMany, authUserRefusalBurst)
	}
	// Another user is asked for as before, and so is a grant of the
	// flooding user (a grant spends nothing).
	if code := do("GET", "/v1/volumes/v", "attacher"); code != 404 && code != 200 {
		t.Errorf("another user during the flood: %d", code)
	}
	// The flooding user's requests the apiserver would grant are still
	// asked: the budget is spent only by refusals, but a user without one
	// left is not asked about anything new.
	if code := do("GET", "/v1/volumes/w", "good"); code != http.StatusTooManyRequests {
		t.Errorf("the flooding user's next new request: %d, want 429 until the budget refills", code)
	}
	now = now.Add(time.Second / authUserRefusalRate)
	if code := do("GET", "/v1/volumes/w", "good"); code != 404 && code != 200 {
		t.Errorf("after the refill: %d, want the request asked and served", code)
	}
}

// The cache of grants keys on everything the SubjectAccessReview is
// asked about, a token's extra attributes included: a grant to a token
// bound to one pod is not reused for a token of the same user bound to
// another.
func TestGrantKeyHoldsTheUsersExtra(t *testing.T) {
	acc := access{verb: "get", resource: "volumes", name: "v"}
	a := authenticationv1.UserInfo{Username: "system:serviceaccount:ns:sa", Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"p1"}}}
	b := authenticationv1.UserInfo{Username: "system:serviceaccount:ns:sa", Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"p2"}}}
	if grantKey(a, acc) == grantKey(b, acc) {
		t.Error("two tokens of one user bound to different pods share a grant")
	}
	if grantKey(a, acc) != grantKey(a, acc) {
		t.Error("the key is not stable")
	}
}

// Requests that miss the cache with the same token at once (a UI's burst
// when its token's entry has just expired) share one TokenReview: none is
// refused for the caller's budget of new tokens.
func TestConcurrentRequestsWithOneNewTokenShareOneReview(t *testing.T) {
	s := newTestServer(t)
	// A review that takes a while, so the burst's requests overlap it.
	f := &fakeReviews{allow: func(*authorizationv1.ResourceAttributes) bool { return true }, delay: 200 * time.Millisecond}
	s.server.EnableKubernetesAuth(f.client(), testNamespace)
	now := time.Now()
	s.server.auth.now = func() time.Time { return now }
	var wg sync.WaitGroup
	codes := make(chan int, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := httptest.NewRequest("GET", "/v1/volumes", nil)
			req.RemoteAddr = "10.0.0.7:40000"
			req.Header.Set("Authorization", "Bearer good")
			rec := httptest.NewRecorder()
			s.handler.ServeHTTP(rec, req)
			codes <- rec.Code
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Fatalf("a request of the burst answered %d", c)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tokens > authCallerReviewBurst {
		t.Errorf("%d TokenReviews for one token asked 50 times at once", f.tokens)
	}
}

// An action is update on the object or, narrower, update on its
// subresource named after the action: a caller granted only
// volumes/snapshotCreate takes snapshots and nothing else, its grant
// remembered (the next call asks nothing); a refusal names both.
func TestAnActionNeedsUpdateOnTheObjectOrOnTheActionsSubresource(t *testing.T) {
	s := newTestServer(t)
	f := &fakeReviews{allow: func(ra *authorizationv1.ResourceAttributes) bool {
		return ra.Resource == "volumes" && ra.Subresource == "snapshotCreate" && ra.Verb == "update"
	}}
	s.server.EnableKubernetesAuth(f.client(), testNamespace)
	call := func(action string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/v1/volumes/v?action="+action, strings.NewReader(`{"name":"s"}`))
		req.Header.Set("Authorization", "Bearer good")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec
	}
	if rec := call("snapshotCreate"); rec.Code == http.StatusForbidden || rec.Code == http.StatusUnauthorized {
		t.Fatalf("snapshotCreate with the subresource granted: %d %s", rec.Code, rec.Body)
	}
	f.take()
	if rec := call("snapshotCreate"); rec.Code == http.StatusForbidden {
		t.Fatalf("snapshotCreate again: %d", rec.Code)
	}
	if got := f.take(); len(got) != 0 {
		t.Errorf("a remembered narrow grant asked again: %v", got)
	}
	rec := call("attach")
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `may not update volumes.longhorn.io \"v\", nor update volumes/attach.longhorn.io \"v\"`) {
		t.Errorf("attach with only snapshotCreate granted: %d %s", rec.Code, rec.Body)
	}
}

// A full drill needs a right of its own: update on
// backupvolumes/backupVerifyFull (or on the backup volume), beside the
// backupVerify subresource a block drill needs.
func TestAFullDrillNeedsItsOwnRight(t *testing.T) {
	s := newTestServer(t, &longhorn.BackupVolume{ObjectMeta: metav1.ObjectMeta{Name: "bv", Namespace: testNamespace}})
	eventually(t, "the backup volume in the cache", func() bool { _, err := s.server.ds.GetBackupVolumeRO("bv"); return err == nil })
	full := false
	f := &fakeReviews{allow: func(ra *authorizationv1.ResourceAttributes) bool {
		return ra.Resource == "backupvolumes" && ra.Verb == "update" &&
			(ra.Subresource == "backupVerify" || (full && ra.Subresource == "backupVerifyFull"))
	}}
	s.server.EnableKubernetesAuth(f.client(), testNamespace)
	now := time.Now()
	s.server.auth.now = func() time.Time { return now }
	call := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/v1/backupvolumes/bv?action=backupVerify", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer good")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec
	}
	if rec := call(`{}`); rec.Code == http.StatusForbidden || rec.Code == http.StatusUnauthorized {
		t.Fatalf("a block drill with backupVerify granted: %d %s", rec.Code, rec.Body)
	}
	rec := call(`{"full":true}`)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `nor update backupvolumes/backupVerifyFull.longhorn.io \"bv\"`) {
		t.Errorf("a full drill with backupVerify alone: %d %s", rec.Code, rec.Body)
	}
	// The grant applies once the refusal is no longer remembered.
	full = true
	now = now.Add(authAccessRefusalTTL)
	if rec := call(`{"full":true}`); rec.Code == http.StatusForbidden || rec.Code == http.StatusUnauthorized {
		t.Errorf("a full drill with backupVerifyFull granted: %d %s", rec.Code, rec.Body)
	}
}

// A backup target's credential Secret, and the setting that names the
// default target's, need the caller's get on that Secret (the manager
// reads what it names: the internal CA's is in its namespace); a name
// left as it was is not asked again.
func TestABackupTargetsCredentialNeedsTheRightToReadIt(t *testing.T) {
	s := newTestServer(t, &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: "backup-target-credential-secret", Namespace: testNamespace}})
	eventually(t, "the setting in the cache", func() bool {
		_, err := s.server.ds.GetSettingRO("backup-target-credential-secret")
		return err == nil
	})
	f := &fakeReviews{allow: func(ra *authorizationv1.ResourceAttributes) bool {
		if ra.Group == "" && ra.Resource == "secrets" {
			return ra.Verb == "get" && ra.Name == "mine"
		}
		return ra.Group == "longhorn.io"
	}}
	s.server.EnableKubernetesAuth(f.client(), testNamespace)
	call := func(method, path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer good")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec
	}
	rec := call("POST", "/v1/backuptargets", `{"name":"t","backupTargetURL":"s3://b@us-east-1/","credentialSecret":"longhorn-internal-ca","pollInterval":"60"}`)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `alice may not get secrets \"longhorn-internal-ca\"`) {
		t.Errorf("a target naming a Secret the caller may not read: %d %s", rec.Code, rec.Body)
	}
	if got := f.take(); len(got) == 0 || got[len(got)-1] != "get /secrets "+testNamespace+" longhorn-internal-ca" {
		t.Errorf("reviews %v: want the last a get on the Secret in the core group", got)
	}
	if rec := call("POST", "/v1/backuptargets", `{"name":"t","backupTargetURL":"s3://b@us-east-1/","credentialSecret":"mine","pollInterval":"60"}`); rec.Code != http.StatusOK {
		t.Fatalf("a target naming a Secret the caller may read: %d %s", rec.Code, rec.Body)
	}
	eventually(t, "the target in the cache", func() bool { _, err := s.server.ds.GetBackupTargetRO("t"); return err == nil })
	if rec := call("PUT", "/v1/backuptargets/t", `{"backupTargetURL":"s3://b@us-east-1/","credentialSecret":"longhorn-internal-ca","pollInterval":"60"}`); rec.Code != http.StatusForbidden {
		t.Errorf("an update to a Secret the caller may not read: %d %s", rec.Code, rec.Body)
	}
	f.take()
	if rec := call("PUT", "/v1/backuptargets/t", `{"backupTargetURL":"s3://b@us-east-1/","credentialSecret":"mine","pollInterval":"120"}`); rec.Code != http.StatusOK {
		t.Errorf("an update that keeps the Secret: %d %s", rec.Code, rec.Body)
	}
	for _, r := range f.take() {
		if strings.Contains(r, "secrets") {
			t.Errorf("an update that keeps the Secret asked %q", r)
		}
	}
	if rec := call("PUT", "/v1/settings/backup-target-credential-secret", `{"value":"longhorn-internal-ca"}`); rec.Code != http.StatusForbidden ||
		!strings.Contains(rec.Body.String(), `get secrets \"longhorn-internal-ca\"`) {
		t.Errorf("the credential setting naming a Secret the caller may not read: %d %s", rec.Code, rec.Body)
	}
	if rec := call("PUT", "/v1/settings/backup-target-credential-secret", `{"value":"mine"}`); rec.Code != http.StatusOK {
		t.Errorf("the credential setting naming a Secret the caller may read: %d %s", rec.Code, rec.Body)
	}
}
