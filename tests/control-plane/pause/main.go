// Command pause is the sandbox ("pause") container of the test nodes' pods: it holds the pod's
// namespaces open, reaps orphaned children when it is the pod's init process, and exits on SIGINT or
// SIGTERM. No registry is reachable, so the nodes' containerd gets this image from us instead of
// pulling registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return
		}
		// Reap every exited child; their parents died and left them to us.
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
