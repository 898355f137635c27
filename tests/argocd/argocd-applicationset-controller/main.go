// Command argocd-applicationset-controller runs Argo CD's ApplicationSet controller alone.
//
// Upstream ships every Argo CD component as one multi-call binary (cmd/main.go) that picks its
// command by executable name; building that links the API server, repo server, Dex and CLI too.
// This main links only the ApplicationSet controller's command, as that binary does when named
// argocd-applicationset-controller (GOMAXPROCS set from the cgroup limit, logged).
package main

import (
	"os"

	applicationset "github.com/argoproj/argo-cd/v2/cmd/argocd-applicationset-controller/commands"
	"github.com/argoproj/argo-cd/v2/cmd/util"
)

func main() {
	util.SetAutoMaxProcs(false)
	if err := applicationset.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
