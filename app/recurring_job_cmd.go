package app

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli"
	"k8s.io/client-go/kubernetes"

	jobcontroller "github.com/cadence-storage/longhorn-manager/controller/recurringjob"
	"github.com/cadence-storage/longhorn-manager/jobrun"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
)

// RecurringJobCmd is `longhorn-manager recurring-job <name>`: one run of a
// recurring job, what its CronJob's pods run.
func RecurringJobCmd() cli.Command {
	return cli.Command{
		Name:      "recurring-job",
		Usage:     "run a recurring job once over its volumes",
		ArgsUsage: "<name>",
		Flags: []cli.Flag{
			cli.StringFlag{Name: "manager-url", Value: "http://longhorn-backend:9500/v1", Usage: "the manager API"},
			managerCAFlag,
			cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig file; the in-cluster config when empty", EnvVar: "KUBECONFIG"},
			cli.StringFlag{Name: "namespace", Value: "longhorn-system", Usage: "namespace of the job", EnvVar: "POD_NAMESPACE"},
			cli.StringFlag{Name: "job-name", Usage: "the Kubernetes Job running this pod; its name carries the schedule tick", EnvVar: "JOB_NAME"},
			cli.StringFlag{Name: "tick", Usage: "the schedule time this run is for (RFC 3339); from --job-name, else the current minute"},
			cli.StringFlag{Name: "api-token-file", Usage: "the token sent to a manager with --api-auth=kubernetes, projected for its --api-token-audience; the kubeconfig's when empty", EnvVar: "API_TOKEN_FILE"},
			cli.DurationFlag{Name: "retry-for", Value: 2 * time.Minute, Usage: "how long to retry an unreachable apiserver or manager"},
			cli.DurationFlag{Name: "backup-timeout", Value: time.Hour, Usage: "how long to wait for one backup to complete"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("recurring-job takes the job's name, got %d arguments", c.NArg())
			}
			tick, err := scheduleTick(c.String("tick"), c.Args().First(), c.String("job-name"), time.Now())
			if err != nil {
				return err
			}
			cfg, err := restConfig(c.String("kubeconfig"))
			if err != nil {
				return err
			}
			lh, err := lhclientset.NewForConfig(cfg)
			if err != nil {
				return err
			}
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			client, err := newAPIClient(c.String("manager-url"), c.Duration("retry-for"), c.String("manager-ca-file"))
			if err != nil {
				return err
			}
			// The pod's own token, for a manager with --api-auth=kubernetes:
			// the one projected for the API's audience when there is one.
			client.Token = bearerTokenSource(cfg)
			if path := c.String("api-token-file"); path != "" {
				client.Token = tokenFile(path)
			}
			runner := &jobrun.Executor{
				Namespace: c.String("namespace"), Longhorn: lh, Kube: kube,
				API:      client,
				Log:      logrus.WithField("component", "recurring-job"),
				RetryFor: c.Duration("retry-for"), Tick: tick, BackupTimeout: c.Duration("backup-timeout"),
			}
			res, err := runner.Run(ctx, c.Args().First())
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stdout, "succeeded=%d failed=%d skipped=%d max-in-flight=%d\n", res.Succeeded, res.Failed, res.Skipped, res.MaxInFlight)
			// A failed volume fails the pod, so its Job fails and the
			// CronJob's lastSuccessfulTime says when a run last did all.
			return res.Err()
		},
	}
}

// scheduleTick is the schedule time a run is for: --tick, else the tick
// in the Job's name (<cronjob>-<minutes since the epoch>, as the CronJob
// controller names Jobs), else the current minute.
func scheduleTick(flag, recurringJob, jobName string, now time.Time) (time.Time, error) {
	if flag != "" {
		t, err := time.Parse(time.RFC3339, flag)
		if err != nil {
			return time.Time{}, fmt.Errorf("--tick %q: must be an RFC 3339 time such as 2026-11-22T02:00:00Z", flag)
		}
		return t, nil
	}
	// The CronJob has the recurring job's name.
	if tick, ok := jobcontroller.TickFromJobName(recurringJob, jobName); ok {
		return tick, nil
	}
	return now.UTC().Truncate(time.Minute), nil
}
