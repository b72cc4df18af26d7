package app

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// managerContainer is the manager's container in its DaemonSet's pods
// (package/longhorn-manager.yaml).
const managerContainer = "longhorn-manager"

// managerImage is --manager-image, or empty when it was not given and
// --pod-name was: the daemon then runs its own pod's image (ownImage).
func managerImage(c *cli.Context) string {
	if c.String("pod-name") != "" && !c.IsSet("manager-image") {
		return ""
	}
	return c.String("manager-image")
}

// ownImage fills the empty manager images from this manager's pod: the
// image of its longhorn-manager container, so that an installer who
// renames the image (kustomize's images:, a private registry) changes it
// in one place and the pods the manager starts follow.
func (o *DaemonOptions) ownImage(ctx context.Context, kube kubernetes.Interface) error {
	if o.PodName == "" || o.CronJob.ManagerImage != "" {
		return nil
	}
	pod, err := kube.CoreV1().Pods(o.Namespace).Get(ctx, o.PodName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("--pod-name %s/%s: read the manager's own image from its pod: %w (or give --manager-image)", o.Namespace, o.PodName, err)
	}
	image := ""
	for _, c := range pod.Spec.Containers {
		if c.Name == managerContainer {
			image = c.Image
		}
	}
	if image == "" {
		return fmt.Errorf("--pod-name %s/%s: the pod has no %s container to take the image of (give --manager-image)", o.Namespace, o.PodName, managerContainer)
	}
	o.CronJob.ManagerImage = image
	if o.ManagerImage == "" {
		o.ManagerImage = image
	}
	if o.BackingImageManagerImage == "" {
		o.BackingImageManagerImage = image
	}
	logrus.WithFields(logrus.Fields{"pod": o.Namespace + "/" + o.PodName, "image": image}).Info("The recurring-job and backing image server pods run this manager's own image")
	return nil
}
