//go:build e2e

package api

import (
	"context"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/app"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// With --api-token-audience, as package/ deploys the manager, the API
// takes only tokens projected for its audience (issue: the TokenReview
// named no audience, so a token the recurring-job pods send over plain
// HTTP was also a credential at the apiserver): a pod's default token,
// made for the apiserver, is refused with a 401 that names the audience;
// the same account's token for the API's audience is served; and that
// token is no credential at the apiserver.
func TestTheAPITakesOnlyTokensOfItsAudience(t *testing.T) {
	t.Parallel()
	e, _ := framework.KubernetesAuthAPIEnv(t, func(o *app.DaemonOptions) { o.APITokenAudience = "longhorn-manager" })
	e.UIUser(t, "operator", "longhorn-ui-operator")
	apiserverToken := framework.TokenOf(t, e.Kube, e.NS, "operator")
	apiToken := framework.TokenOf(t, e.Kube, e.NS, "operator", "longhorn-manager")

	e.Call(t, "GET", "/v1/volumes", "", "Authorization", "Bearer "+apiserverToken).
		Expect(t, http.StatusUnauthorized, "not valid for audience longhorn-manager")
	e.Call(t, "GET", "/v1/volumes", "", "Authorization", "Bearer "+apiToken).Expect(t, http.StatusOK)
	// Refusals are cached for a while; the accepted token stays accepted.
	e.Call(t, "GET", "/v1/volumes", "", "Authorization", "Bearer "+apiserverToken).Expect(t, http.StatusUnauthorized)
	e.Call(t, "GET", "/v1/volumes", "", "Authorization", "Bearer "+apiToken).Expect(t, http.StatusOK)

	// At the apiserver the API's token is nobody, and the apiserver's
	// token is the account.
	at := func(token string) error {
		cfg := rest.AnonymousClientConfig(e.Cluster.Config)
		cfg.BearerToken = token
		lh, err := lhclientset.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = lh.LonghornV1beta2().Volumes(e.NS).List(context.Background(), metav1.ListOptions{})
		return err
	}
	if err := at(apiToken); err == nil {
		t.Error("the token made for the API lists volumes at the apiserver")
	}
	if err := at(apiserverToken); err != nil {
		t.Errorf("the account's own token at the apiserver: %v", err)
	}
}
