package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// impersonation is what a request's Impersonate-* headers ask for: to
// act as user, and what the caller must be allowed to impersonate for it,
// as kube-apiserver asks (impersonate on users, or on the ServiceAccount
// a service account user names; on groups; on uids and userextras of
// authentication.k8s.io).
type impersonation struct {
	user  authenticationv1.UserInfo
	needs []authorizationv1.ResourceAttributes
}

// impersonationOf reads r's impersonation headers; nil when it has none.
// Groups, a UID or extras without a user are a 400, as at the apiserver.
func impersonationOf(r *http.Request) (*impersonation, error) {
	var extraKeys []string
	for name := range r.Header {
		if k := http.CanonicalHeaderKey(name); strings.HasPrefix(k, impersonateExtraPrefix) {
			extraKeys = append(extraKeys, k)
		}
	}
	user := r.Header.Get(impersonateUserHeader)
	groups := r.Header.Values(impersonateGroupHeader)
	uid := r.Header.Get(impersonateUIDHeader)
	if user == "" {
		if len(groups) > 0 || uid != "" || len(extraKeys) > 0 {
			return nil, &httpError{http.StatusBadRequest, "BadRequest",
				"Impersonate-Group, Impersonate-Uid and Impersonate-Extra-* need Impersonate-User"}
		}
		return nil, nil
	}
	imp := &impersonation{user: authenticationv1.UserInfo{Username: user, UID: uid}}
	if ns, name, ok := serviceAccountOf(user); ok {
		imp.needs = append(imp.needs, authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: ns, Name: name})
		// As the apiserver gives a service account's token.
		imp.user.Groups = append(imp.user.Groups, "system:serviceaccounts", "system:serviceaccounts:"+ns)
	} else {
		imp.needs = append(imp.needs, authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "users", Name: user})
	}
	for _, g := range groups {
		imp.needs = append(imp.needs, authorizationv1.ResourceAttributes{Verb: "impersonate", Resource: "groups", Name: g})
		imp.user.Groups = append(imp.user.Groups, g)
	}
	if uid != "" {
		imp.needs = append(imp.needs, authorizationv1.ResourceAttributes{Verb: "impersonate", Group: "authentication.k8s.io", Resource: "uids", Name: uid})
	}
	slices.Sort(extraKeys)
	for _, k := range extraKeys {
		key := strings.ToLower(strings.TrimPrefix(k, impersonateExtraPrefix))
		for _, v := range r.Header.Values(k) {
			imp.needs = append(imp.needs, authorizationv1.ResourceAttributes{Verb: "impersonate", Group: "authentication.k8s.io", Resource: "userextras", Subresource: key, Name: v})
			if imp.user.Extra == nil {
				imp.user.Extra = map[string]authenticationv1.ExtraValue{}
			}
			imp.user.Extra[key] = append(imp.user.Extra[key], v)
		}
	}
	// An impersonated user is an authenticated one, as at the apiserver,
	// so RBAC bound to system:authenticated applies to it as to its own
	// token.
	if user != "system:anonymous" && !slices.Contains(imp.user.Groups, "system:authenticated") {
		imp.user.Groups = append(imp.user.Groups, "system:authenticated")
	}
	return imp, nil
}

// serviceAccountOf splits a service account's user name
// (system:serviceaccount:<namespace>:<name>).
func serviceAccountOf(user string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok && namespace != "" && name != "" && !strings.Contains(name, ":")
}

// impersonate returns who the request acts as: caller, or the user its
// Impersonate-* headers name once caller may impersonate every part of
// it (SubjectAccessReviews of caller, remembered as grants and refusals
// are). A caller that may not is refused (403): the headers are never
// ignored, so a request is never served as someone it did not ask to be.
func (a *kubeAuth) impersonate(ctx context.Context, r *http.Request, caller authenticationv1.UserInfo) (authenticationv1.UserInfo, error) {
	imp, err := impersonationOf(r)
	if err != nil || imp == nil {
		return caller, err
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range caller.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	for _, need := range imp.needs {
		// No route's access has the verb impersonate: these keys are
		// apart from theirs.
		key := grantKey(caller, access{verb: need.Verb, resource: need.Group + "/" + need.Resource, subresource: need.Subresource, name: need.Namespace + "/" + need.Name})
		if a.isGranted(key) {
			continue
		}
		if a.isDenied(key) {
			return authenticationv1.UserInfo{}, impersonationRefused(caller, need)
		}
		if !a.mayBeRefused(caller) {
			return authenticationv1.UserInfo{}, &httpError{http.StatusTooManyRequests, "TooManyRequests",
				fmt.Sprintf("%s was refused too many requests lately: retry later", caller.Username)}
		}
		sar, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: caller.Username, UID: caller.UID, Groups: caller.Groups, Extra: extra, ResourceAttributes: &need,
		}}, metav1.CreateOptions{})
		if err != nil {
			return authenticationv1.UserInfo{}, &httpError{http.StatusServiceUnavailable, "AuthUnavailable", "the impersonation cannot be authorized now: " + err.Error()}
		}
		if !sar.Status.Allowed {
			a.deny(caller, key)
			return authenticationv1.UserInfo{}, impersonationRefused(caller, need)
		}
		a.grant(key)
	}
	return imp.user, nil
}

// impersonationRefused says which part of an impersonation the caller
// may not ask for.
func impersonationRefused(caller authenticationv1.UserInfo, need authorizationv1.ResourceAttributes) error {
	what := need.Resource
	if need.Subresource != "" {
		what += "/" + need.Subresource
	}
	if need.Group != "" {
		what += "." + need.Group
	}
	where := ""
	if need.Namespace != "" {
		where = " in namespace " + need.Namespace
	}
	return forbidden("%s may not impersonate %s %q%s (Kubernetes RBAC): the Impersonate-* headers are honoured only from an account allowed to impersonate (Longhorn's UI behind an authenticating proxy: package/components/ui-impersonation/rbac-ui-impersonate.yaml)",
		caller.Username, what, need.Name, where)
}

// noCredential is the 401 of a request that carries no Authorization. One
// that came through Longhorn's UI (its proxy sets X-Forwarded-Host) is
// from a browser, whose user cannot send a token by hand: the answer,
// which the UI shows, says to log in through the cluster's login in front
// of the UI.
func noCredential(r *http.Request, err error) error {
	if r.Header.Get("Authorization") != "" || r.Header.Get("X-Forwarded-Host") == "" {
		return err
	}
	return authError("you are not logged in: this manager serves only users Kubernetes knows (--api-auth=kubernetes), and the request came through Longhorn's UI without a login of yours; open the UI through the login your administrator put in front of it (docs/api.md, \"Longhorn's web UI\")")
}
