// Command addon-namespaces runs, alone, the klusterlet operator's controller that copies the
// operator namespace's image pull secret into every namespace labelled
// `addon.open-cluster-management.io/namespace: "true"` (OCM's convention for add-on agent
// namespaces). The test control plane runs the klusterlet's agents without the operator, whose
// other controllers would deploy the klusterlet from images; this runs OCM's own controller code
// from the pinned module, so a test sees what a real klusterlet does with our namespace.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"open-cluster-management.io/ocm/pkg/operator/operators/klusterlet/controllers/addonsecretcontroller"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the managed cluster (required)")
	operatorNamespace := flag.String("operator-namespace", "open-cluster-management",
		"namespace holding the open-cluster-management-image-pull-credentials Secret")
	flag.Parse()
	if err := run(*kubeconfig, *operatorNamespace); err != nil {
		fmt.Fprintln(os.Stderr, "addon-namespaces:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, operatorNamespace string) error {
	if kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading --kubeconfig %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The operator's own resync period, so a missed event is repaired as upstream repairs it.
	factory := informers.NewSharedInformerFactory(client, 5*time.Minute)
	controller := addonsecretcontroller.NewAddonPullImageSecretController(
		client, operatorNamespace, factory.Core().V1().Namespaces())
	factory.Start(ctx.Done())
	go controller.Run(ctx, 1)
	<-ctx.Done()
	return nil
}
