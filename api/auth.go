package api

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// The values of --api-auth.
const (
	// AuthNone serves every caller, as Longhorn does: the network is the
	// only guard.
	AuthNone = "none"
	// AuthKubernetes checks the caller's bearer token with a TokenReview
	// and each request with a SubjectAccessReview, so the RBAC that
	// governs kubectl on the longhorn.io resources governs the API too.
	AuthKubernetes = "kubernetes"
)

// kubeAuth asks the apiserver who a token is and what it may do.
type kubeAuth struct {
	kube      kubernetes.Interface
	namespace string
	// audiences, when set, are the token audiences the API accepts: a
	// token bound to none of them (a pod's default token, made for the
	// apiserver) is refused, and a token made for the API is no
	// credential at the apiserver.
	audiences []string
	now       func() time.Time

	// Accepted tokens and granted accesses are remembered for
	// authCacheTTL, so a UI polling the API does not cost the apiserver
	// two reviews a request. A refused token is remembered for
	// authRefusalTTL, so one bad token sent again and again costs one
	// review; a refused access for authAccessRefusalTTL, so a request
	// refused again and again costs its reviews once in that time, and a
	// new RoleBinding applies within it (a revoked one within the TTL).
	mu      sync.Mutex
	tokens  map[[32]byte]cached[authenticationv1.UserInfo]
	refused map[[32]byte]time.Time
	granted map[string]time.Time
	denied  map[string]time.Time
	// refusals is each user's budget of refused SubjectAccessReviews: a
	// user whose requests the apiserver keeps refusing (each one for
	// another object) is answered 429 once it is spent, without asking,
	// so one caller's refusals cannot use up the reviews' shared rate
	// (authReviewQPS) that the CSI sidecars' calls need too. Granted
	// reviews spend nothing.
	refusals map[string]*rate.Limiter
	// reviews bounds the TokenReviews of tokens in no cache: a flood of
	// new tokens is answered 429 beyond it, not passed to the apiserver.
	// Each caller's address has a budget of its own within it (callers),
	// so one caller's flood does not lock the others out.
	reviews *rate.Limiter
	callers map[string]*rate.Limiter
	// inflight joins the reviews of one token asked at once.
	inflight singleflight.Group
}

// authCacheTTL bounds how long a token or a grant is trusted without
// asking again; authRefusalTTL how long a refused token is refused
// without asking; authCacheMax bounds each cache (it is emptied when
// full). At most authReviewRate TokenReviews a second (authReviewBurst at
// once) are asked for tokens the caches do not know.
const (
	authCacheTTL    = 10 * time.Second
	authRefusalTTL  = 10 * time.Second
	authCacheMax    = 4096
	authReviewRate  = 20
	authReviewBurst = 40
	// A caller's own budget of new tokens.
	authCallerReviewRate  = 2
	authCallerReviewBurst = 5
	// How long a refused access is refused without asking, and each
	// user's budget of refused SubjectAccessReviews.
	authAccessRefusalTTL = 5 * time.Second
	authUserRefusalRate  = 5
	authUserRefusalBurst = 50
)

type cached[T any] struct {
	value T
	at    time.Time
}

// EnableKubernetesAuth makes every /v1 request and /metrics need a bearer
// token the apiserver accepts (TokenReview) for a user allowed the
// longhorn.io resource and verb the request touches in namespace
// (SubjectAccessReview). /healthz and /readyz stay open for the kubelet.
// The manager's own account needs create on tokenreviews and
// subjectaccessreviews (package/rbac.yaml grants it). kube should be a
// client of its own (with its own rate limit), not the one the
// controllers and the node's heartbeat use: a flood of tokens then
// waits on its own limit, not theirs. audiences, when given, are the
// token audiences accepted (see kubeAuth.audiences); none accepts the
// apiserver's own.
func (s *Server) EnableKubernetesAuth(kube kubernetes.Interface, namespace string, audiences ...string) {
	s.auth = &kubeAuth{kube: kube, namespace: namespace, audiences: audiences, now: time.Now,
		tokens: map[[32]byte]cached[authenticationv1.UserInfo]{}, refused: map[[32]byte]time.Time{}, granted: map[string]time.Time{},
		denied: map[string]time.Time{}, refusals: map[string]*rate.Limiter{},
		reviews: rate.NewLimiter(authReviewRate, authReviewBurst), callers: map[string]*rate.Limiter{}}
}

// access is what one request touches: a verb on a longhorn.io resource
// (named, for a single object; a subresource for one action), or a
// non-resource path. An empty access (the API root and schemas) needs
// only an authenticated caller. orElse, when set, is a narrower grant
// that does as well: an action on an object is update on it, or update
// on the object's subresource named after the action (volumes/snapshotCreate),
// which RBAC can grant alone (package/rbac.yaml's recurring-job account).
type access struct {
	verb, resource, subresource, name, path string
	// core: the resource is Kubernetes' own (a Secret), not longhorn.io's.
	core   bool
	orElse *access
}

// group is the API group of the access's resource.
func (a access) group() string {
	if a.core {
		return ""
	}
	return longhorn.SchemeGroupVersion.Group
}

func (a access) String() string {
	if a.path != "" {
		return fmt.Sprintf("%s %s", a.verb, a.path)
	}
	res := a.resource
	if a.subresource != "" {
		res += "/" + a.subresource
	}
	s := a.verb + " " + res
	if !a.core {
		s += "." + a.group()
	}
	if a.name != "" {
		s += fmt.Sprintf(" %q", a.name)
	}
	return s
}

// readOnlyActions are the POST actions that only read: they need get, not
// update.
var readOnlyActions = map[string]bool{
	"recurringJobList": true, "snapshotList": true, "snapshotGet": true,
	"backupList": true, "backupGet": true, "snapshotCRList": true, "snapshotCRGet": true,
}

// routeAccess maps a route (as named in Router) and its request to what
// it touches: a list or create on the collection, get, update (PUT and
// the actions that change something) and delete on the object, get for
// the actions that only read, list and watch for a websocket stream.
// backupDelete deletes a backup, so it needs delete on backups, as does
// deleting a backup volume (all its backups).
func routeAccess(route string, r *http.Request) []access {
	vars := mux.Vars(r)
	if route == "ws" {
		res := vars["resource"]
		return []access{{verb: "list", resource: res}, {verb: "watch", resource: res}}
	}
	resource, op, ok := strings.Cut(route, ".")
	if !ok {
		// root, schemas, schema
		return nil
	}
	name := vars["name"]
	switch op {
	case "list", "create":
		return []access{{verb: op, resource: resource}}
	case "get", "update", "delete":
		if op == "delete" && resource == "backupvolumes" {
			// Deleting a backup volume deletes every backup of it.
			return []access{{verb: op, resource: resource, name: name}, {verb: "delete", resource: "backups"}}
		}
		return []access{{verb: op, resource: resource, name: name}}
	case "action":
		action := r.URL.Query().Get("action")
		switch {
		case readOnlyActions[action]:
			return []access{{verb: "get", resource: resource, name: name}}
		case action == "backupDelete":
			return []access{{verb: "delete", resource: "backups"}}
		default:
			return []access{{verb: "update", resource: resource, name: name,
				orElse: &access{verb: "update", resource: resource, subresource: action, name: name}}}
		}
	}
	// A route this table does not know is refused rather than let through.
	return []access{{verb: "unknown-route-" + route, resource: resource}}
}

// authError is a 401: no credentials, or credentials the apiserver does
// not accept.
func authError(format string, args ...any) error {
	return &httpError{http.StatusUnauthorized, "Unauthorized", fmt.Sprintf(format, args...)}
}

func forbidden(format string, args ...any) error {
	return &httpError{http.StatusForbidden, "Forbidden", fmt.Sprintf(format, args...)}
}

// bearerToken is the token of an "Authorization: Bearer ..." header.
func bearerToken(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", authError("this API needs a Kubernetes bearer token (--api-auth=kubernetes): send Authorization: Bearer <token>")
	}
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", authError("Authorization: only a Bearer token is accepted")
	}
	return token, nil
}

// check authenticates the request (and its impersonation, if it asks for
// one) and authorizes each access as the user it acts as.
func (a *kubeAuth) check(ctx context.Context, r *http.Request, accesses []access) error {
	token, err := bearerToken(r)
	if err != nil {
		return noCredential(r, err)
	}
	user, err := a.authenticate(ctx, token, callerAddress(r))
	if err != nil {
		return err
	}
	// Longhorn's UI passes a user its authenticating proxy named as
	// itself impersonating them (auth_impersonate.go).
	if user, err = a.impersonate(ctx, r, user); err != nil {
		return err
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	for _, acc := range accesses {
		options := []access{acc}
		if acc.orElse != nil {
			options = append(options, *acc.orElse)
		}
		// A grant remembered for any option does; otherwise each is
		// asked in turn (the narrow one is remembered once granted, so a
		// caller that has only it asks nothing the next time).
		if slices.ContainsFunc(options, func(o access) bool { return a.isGranted(grantKey(user, o)) }) {
			continue
		}
		allowed := false
		for _, o := range options {
			key := grantKey(user, o)
			if a.isDenied(key) {
				continue
			}
			if !a.mayBeRefused(user) {
				return &httpError{http.StatusTooManyRequests, "TooManyRequests",
					fmt.Sprintf("%s was refused too many requests lately: retry later", user.Username)}
			}
			if allowed, err = a.authorize(ctx, user, extra, o); err != nil {
				return err
			}
			if allowed {
				break
			}
			a.deny(user, key)
		}
		if !allowed {
			where := ""
			if acc.path == "" {
				where = " in namespace " + a.namespace
			}
			if acc.orElse != nil {
				return forbidden("%s may not %s, nor %s%s (Kubernetes RBAC)", user.Username, acc, *acc.orElse, where)
			}
			return forbidden("%s may not %s%s (Kubernetes RBAC)", user.Username, acc, where)
		}
	}
	return nil
}

// authorize asks the apiserver whether user may do acc
// (SubjectAccessReview), and remembers a grant.
func (a *kubeAuth) authorize(ctx context.Context, user authenticationv1.UserInfo, extra map[string]authorizationv1.ExtraValue, acc access) (bool, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
	}
	if acc.path != "" {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: acc.path, Verb: acc.verb}
	} else {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace: a.namespace, Verb: acc.verb, Group: acc.group(),
			Resource: acc.resource, Subresource: acc.subresource, Name: acc.name,
		}
	}
	sar, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, &httpError{http.StatusServiceUnavailable, "AuthUnavailable", "the request cannot be authorized now: " + err.Error()}
	}
	if sar.Status.Allowed {
		a.grant(grantKey(user, acc))
	}
	return sar.Status.Allowed, nil
}

// callerAddress is the address a request came from, without its port.
func callerAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// mayReview reports whether a TokenReview of a new token from caller
// fits in the caller's budget and then the API's. A caller over its own
// budget does not spend the API's.
func (a *kubeAuth) mayReview(caller string, now time.Time) bool {
	a.mu.Lock()
	l := limiterOf(a.callers, caller, authCallerReviewRate, authCallerReviewBurst)
	a.mu.Unlock()
	return l.AllowN(now, 1) && a.reviews.AllowN(now, 1)
}

// limiterOf is key's limiter in m, made with rate r and burst b when it
// has none; m is emptied when full. The caller holds the lock of m.
func limiterOf(m map[string]*rate.Limiter, key string, r rate.Limit, b int) *rate.Limiter {
	l, ok := m[key]
	if !ok {
		if len(m) >= authCacheMax {
			clear(m)
		}
		l = rate.NewLimiter(r, b)
		m[key] = l
	}
	return l
}

// authenticate returns who the token is, from the cache or a TokenReview.
func (a *kubeAuth) authenticate(ctx context.Context, token, caller string) (authenticationv1.UserInfo, error) {
	sum := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	c, ok := a.tokens[sum]
	refusedAt, wasRefused := a.refused[sum]
	a.mu.Unlock()
	if ok && now.Sub(c.at) < authCacheTTL {
		return c.value, nil
	}
	if wasRefused && now.Sub(refusedAt) < authRefusalTTL {
		return authenticationv1.UserInfo{}, a.refusal()
	}
	// Requests that miss the cache with the same token at once (a UI's
	// burst when its token's entry expires) share one review, and spend
	// one review of the budget, not one each.
	v, err, _ := a.inflight.Do(string(sum[:]), func() (any, error) {
		// Not the first request's cancellation: the others wait on it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), authReviewTimeout)
		defer cancel()
		return a.review(ctx, token, sum, caller, now)
	})
	user, _ := v.(authenticationv1.UserInfo)
	return user, err
}

// authReviewTimeout bounds one TokenReview.
const authReviewTimeout = 10 * time.Second

// review asks the apiserver who token is (within the caller's budget) and
// remembers the answer.
func (a *kubeAuth) review(ctx context.Context, token string, sum [32]byte, caller string, now time.Time) (authenticationv1.UserInfo, error) {
	if !a.mayReview(caller, now) {
		return authenticationv1.UserInfo{}, &httpError{http.StatusTooManyRequests, "TooManyRequests",
			"too many new bearer tokens to check from this address or in all: retry later"}
	}
	review, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, &httpError{http.StatusServiceUnavailable, "AuthUnavailable", "the token cannot be checked now: " + err.Error()}
	}
	// An audience-aware apiserver answers which of the asked audiences the
	// token holds; a review that names none of them is no acceptance.
	if !review.Status.Authenticated || (len(a.audiences) > 0 && !slices.ContainsFunc(review.Status.Audiences, func(aud string) bool {
		return slices.Contains(a.audiences, aud)
	})) {
		a.mu.Lock()
		if len(a.refused) >= authCacheMax {
			clear(a.refused)
		}
		a.refused[sum] = now
		a.mu.Unlock()
		return authenticationv1.UserInfo{}, a.refusal()
	}
	a.mu.Lock()
	if len(a.tokens) >= authCacheMax {
		clear(a.tokens)
	}
	a.tokens[sum] = cached[authenticationv1.UserInfo]{value: review.Status.User, at: now}
	a.mu.Unlock()
	return review.Status.User, nil
}

// refusal answers a token the TokenReview refused. The apiserver's reason
// may describe the token; it says only that it was refused, and for which
// audiences it was asked.
func (a *kubeAuth) refusal() error {
	if len(a.audiences) > 0 {
		return authError("the bearer token is not valid for audience %s (refused by the Kubernetes TokenReview): send a ServiceAccount token projected with that audience",
			strings.Join(a.audiences, ", "))
	}
	return authError("the bearer token is not valid (refused by the Kubernetes TokenReview)")
}

// grantKey names a user's access for the cache of grants: everything the
// SubjectAccessReview was asked about, the user's extra attributes (a
// token's pod and node binding, which an authorizer may judge) included.
func grantKey(user authenticationv1.UserInfo, acc access) string {
	groups := append([]string(nil), user.Groups...)
	sort.Strings(groups)
	var extra []string
	for _, k := range slices.Sorted(maps.Keys(user.Extra)) {
		values := append([]string(nil), user.Extra[k]...)
		sort.Strings(values)
		extra = append(extra, k+"="+strings.Join(values, ","))
	}
	return strings.Join([]string{user.Username, user.UID, strings.Join(groups, ","), strings.Join(extra, ";"), acc.verb, acc.resource, acc.subresource, acc.name, acc.path}, "\x00")
}

// isDenied reports whether the access of key was refused within
// authAccessRefusalTTL.
func (a *kubeAuth) isDenied(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.denied[key]
	return ok && a.now().Sub(at) < authAccessRefusalTTL
}

// deny remembers a refused access and spends one of the user's refusals.
func (a *kubeAuth) deny(user authenticationv1.UserInfo, key string) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.denied) >= authCacheMax {
		clear(a.denied)
	}
	a.denied[key] = now
	a.refusalBudget(user).AllowN(now, 1)
}

// mayBeRefused reports whether the user has a refusal left to spend: a
// review may be asked for it only then.
func (a *kubeAuth) mayBeRefused(user authenticationv1.UserInfo) bool {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refusalBudget(user).TokensAt(now) >= 1
}

// refusalBudget is the user's budget of refusals; a.mu is held.
func (a *kubeAuth) refusalBudget(user authenticationv1.UserInfo) *rate.Limiter {
	return limiterOf(a.refusals, user.Username+"\x00"+user.UID, authUserRefusalRate, authUserRefusalBurst)
}

func (a *kubeAuth) isGranted(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.granted[key]
	return ok && a.now().Sub(at) < authCacheTTL
}

func (a *kubeAuth) grant(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.granted) >= authCacheMax {
		clear(a.granted)
	}
	a.granted[key] = a.now()
}

// authorize wraps a route's handler with the check, when enabled.
func (s *Server) authorize(route string, h handlerFunc) handlerFunc {
	return s.authorizeAccess(func(r *http.Request) []access { return routeAccess(route, r) }, h)
}

func (s *Server) authorizeAccess(accesses func(*http.Request) []access, h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.auth == nil {
			return h(w, r)
		}
		if err := s.auth.check(r.Context(), r, accesses(r)); err != nil {
			if he, ok := err.(*httpError); ok {
				switch he.status {
				case http.StatusUnauthorized:
					w.Header().Set("WWW-Authenticate", `Bearer realm="longhorn-manager"`)
				case http.StatusTooManyRequests:
					w.Header().Set("Retry-After", "1")
				}
			}
			return err
		}
		return h(w, r)
	}
}

// requireAccess checks, when the API checks its callers, that the caller
// may also do each of accesses: a request that reads an object besides the
// one its route names (a volume made from a backup, another volume or a
// backing image; a backing image exported from a volume) needs the
// caller's right on that object too, or it would copy data the caller may
// not read.
func (s *Server) requireAccess(r *http.Request, accesses ...access) error {
	if s.auth == nil || len(accesses) == 0 {
		return nil
	}
	return s.auth.check(r.Context(), r, accesses)
}

// caller is who the request comes from, as the route's check saw it:
// the user its bearer token authenticates or, when that user impersonates
// another (Longhorn's UI for a user its authenticating proxy names), the
// user impersonated (the route's check has asked both; these are its
// cached answers). ok is false when the API checks no callers.
func (s *Server) caller(r *http.Request) (user authenticationv1.UserInfo, ok bool, err error) {
	if s.auth == nil {
		return user, false, nil
	}
	token, err := bearerToken(r)
	if err != nil {
		return user, false, err
	}
	if user, err = s.auth.authenticate(r.Context(), token, callerAddress(r)); err != nil {
		return user, false, err
	}
	if user, err = s.auth.impersonate(r.Context(), r, user); err != nil {
		return user, false, err
	}
	return user, true, nil
}

// authorizePath guards a non-resource path such as /metrics with a
// SubjectAccessReview of a get on it, as Kubernetes components do.
func (s *Server) authorizePath(path string, h http.Handler) http.Handler {
	only := []access{{verb: "get", path: path}}
	return s.wrap(s.authorizeAccess(func(*http.Request) []access { return only }, func(w http.ResponseWriter, r *http.Request) error {
		h.ServeHTTP(w, r)
		return nil
	}))
}
