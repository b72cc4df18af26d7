package api

import (
	"context"
	"net/http"

	"golang.org/x/sync/semaphore"
)

// The JSON bodies being read and decoded at once hold memory in
// proportion to their size: the body, the decoder's copy of it and what it
// decodes into, about bodyCostFactor times its bytes. bodyBudget bounds
// their sum, so a flood of the largest bodies (256 requests in flight of
// 1 MiB each) costs the daemon a bounded amount, not 2.5 MiB a request; a
// request past it waits, its body unread, up to DefaultRequestSlotWait,
// then is answered 429. Small bodies are counted as minBodyCost.
const (
	bodyBudgetBytes = 96 << 20
	bodyCostFactor  = 3
	minBodyCost     = 4 << 10
)

var bodyBudget = semaphore.NewWeighted(bodyBudgetBytes)

// bodyCost is what r's body is counted as: its announced length, or the
// largest body when it announces none.
func bodyCost(r *http.Request) int64 {
	n := int64(maxBodyBytes)
	if r.ContentLength >= 0 && r.ContentLength < n {
		n = r.ContentLength
	}
	return max(n, minBodyCost) * bodyCostFactor
}

// withBodyBudget runs read, which reads and decodes r's body, within the
// budget.
func withBodyBudget(w http.ResponseWriter, r *http.Request, read func() error) error {
	cost := bodyCost(r)
	ctx, cancel := context.WithTimeout(r.Context(), DefaultRequestSlotWait)
	err := bodyBudget.Acquire(ctx, cost)
	cancel()
	if err != nil {
		w.Header().Set("Retry-After", "1")
		return &httpError{http.StatusTooManyRequests, "TooManyRequests",
			"the manager is reading as many request bodies as its memory budget allows; retry later"}
	}
	defer bodyBudget.Release(cost)
	return read()
}
