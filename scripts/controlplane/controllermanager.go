package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
)

// startControllerManager runs the chosen kube-controller-manager controllers
// in this process. It is built from the options package rather than
// NewControllerManagerCommand, which cannot be stopped and would fight the
// apiserver over global feature gates. qps and burst, when not 0, are its
// client-side request limits. extraArgs are added to its flags.
func startControllerManager(ctx context.Context, kubeconfig string, controllers []string, qps float64, burst int, extraArgs []string, done chan<- error) error {
	s, err := kcmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return fmt.Errorf("kube-controller-manager options: %w", err)
	}
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	for _, f := range s.Flags(kcmapp.KnownControllers(), kcmapp.ControllersDisabledByDefault(), kcmapp.ControllerAliases()).FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--secure-port=0",
		// Finished Jobs are kept by the CronJob history limits; the
		// default 10-minute GC sync is fine, but resync quickly so new
		// custom resources are noticed by the garbage collector.
		"--min-resync-period=30s",
	}
	if qps > 0 {
		args = append(args, "--kube-api-qps="+strconv.FormatFloat(qps, 'f', -1, 64))
	}
	if burst > 0 {
		args = append(args, "--kube-api-burst="+strconv.Itoa(burst))
	}
	args = append(args, extraArgs...)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("kube-controller-manager flags: %w", err)
	}
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		return fmt.Errorf("kube-controller-manager feature gates: %w", err)
	}
	c, err := s.Config(ctx, kcmapp.KnownControllers(), kcmapp.ControllersDisabledByDefault(), kcmapp.ControllerAliases())
	if err != nil {
		return fmt.Errorf("kube-controller-manager config: %w", err)
	}
	go func() { done <- kcmapp.Run(ctx, c.Complete()) }()
	return nil
}
