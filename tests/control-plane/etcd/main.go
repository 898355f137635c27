// Command etcd runs a single-member etcd for the test control plane: client traffic on one
// loopback URL, data in a directory the launcher owns, and nothing else.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "directory for etcd's data (required)")
	clientURL := flag.String("listen-client-url", "http://127.0.0.1:2379", "URL clients connect to")
	peerURL := flag.String("listen-peer-url", "http://127.0.0.1:2380", "URL of the (single) peer listener")
	flag.Parse()
	if err := run(*dataDir, *clientURL, *peerURL); err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		os.Exit(1)
	}
}

func run(dataDir, clientURL, peerURL string) error {
	if dataDir == "" {
		return fmt.Errorf("--data-dir is required")
	}
	client, err := url.Parse(clientURL)
	if err != nil {
		return fmt.Errorf("--listen-client-url %q: %w", clientURL, err)
	}
	peer, err := url.Parse(peerURL)
	if err != nil {
		return fmt.Errorf("--listen-peer-url %q: %w", peerURL, err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = dataDir
	cfg.Name = "control-plane"
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.LogLevel = "warn"
	// Test data is thrown away with the directory: skip fsync so a loaded 2-core machine keeps up.
	cfg.UnsafeNoFsync = true

	server, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer server.Close()
	select {
	case <-server.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		return fmt.Errorf("not ready within 60s")
	}
	fmt.Println("etcd ready on", client.String())

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	select {
	case sig := <-signals:
		fmt.Println("etcd stopping on", sig)
		return nil
	case err := <-server.Err():
		return err
	}
}
