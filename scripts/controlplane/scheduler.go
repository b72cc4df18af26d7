package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
)

// startScheduler runs kube-scheduler in this process, for --cluster, where
// a kubelet runs the pods it places. Like the controller manager it is
// built from its options package: the cobra command cannot be stopped.
// It serves no port of its own (--secure-port=0) and does not elect a
// leader: it is the only one.
func startScheduler(ctx context.Context, kubeconfig string, done chan<- error) error {
	opts := scheduleroptions.NewOptions()
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	}
	fs := pflag.NewFlagSet("kube-scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("kube-scheduler flags: %w", err)
	}
	cc, sched, err := schedapp.Setup(ctx, opts)
	if err != nil {
		return fmt.Errorf("kube-scheduler: %w", err)
	}
	go func() { done <- schedapp.Run(ctx, cc, sched) }()
	return nil
}
