// Command placement-bench times OCM's own placement scheduling on a fleet file that
// scheduler-core's placement benchmark wrote, so both sides schedule exactly the same objects.
//
//	placement-bench -fleet fleet-1000.ndjson -placement apps/web
//
// The fleet file holds one JSON object per line: first a FleetHeader (`now`, the time the scores'
// validUntil is relative to), then ManagedClusters, ManagedClusterSets, ManagedClusterSetBindings,
// Placements, PlacementDecisions and AddOnPlacementScores. They go into in-memory informer stores,
// as OCM's unit tests fill them; the clientset is client-go's fake, which keeps what is written.
//
// Timed, each run: one call of the scheduling controller's Sync for the placement (bindings,
// eligible clusters, the plugin scheduler's Schedule, decision groups, the PlacementDecision created
// and its status patched, the Placement's status patched, events). Between runs, untimed, the
// PlacementDecisions written are deleted so that every run is a first scheduling pass, as the Rust
// side's `sync` is. Separately timed: the plugin scheduler's Schedule alone over every cluster.
//
// Prints one JSON line: medians in milliseconds, the number of runs, the clusters decided (sorted)
// and the process's peak resident memory (VmHWM) in MiB.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kevents "k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	clusterfake "open-cluster-management.io/api/client/cluster/clientset/versioned/fake"
	clusterapiv1 "open-cluster-management.io/api/cluster/v1"
	clusterapiv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterapiv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterapiv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"open-cluster-management.io/sdk-go/pkg/basecontroller/factory"

	"open-cluster-management.io/ocm/pkg/placement/controllers/metrics"
	"open-cluster-management.io/ocm/pkg/placement/controllers/scheduling"
	testinghelpers "open-cluster-management.io/ocm/pkg/placement/helpers/testing"
	"open-cluster-management.io/ocm/pkg/placement/plugins/addon"
)

// The result line.
type result struct {
	Clusters       int      `json:"clusters"`
	Placement      string   `json:"placement"`
	Runs           int      `json:"runs"`
	SyncMedianMs   float64  `json:"sync_median_ms"`
	SyncFastestMs  float64  `json:"sync_fastest_ms"`
	ScheduleMedMs  float64  `json:"schedule_median_ms"`
	Decisions      []string `json:"decisions"`
	PeakRSSMiB     float64  `json:"peak_rss_mib"`
	OtherDecisions int      `json:"other_decisions"`
}

func main() {
	fleetPath := flag.String("fleet", "", "the fleet file (NDJSON) written by scheduler-core's placement benchmark")
	placementKey := flag.String("placement", "apps/web", "namespace/name of the Placement to schedule")
	budget := flag.Duration("budget", 1500*time.Millisecond, "keep running while the runs took less than this (at least -min-runs)")
	minRuns := flag.Int("min-runs", 7, "the fewest timed runs")
	flag.Parse()
	if *fleetPath == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: placement-bench -fleet FILE [-placement NS/NAME]")
		os.Exit(2)
	}
	r, err := run(*fleetPath, *placementKey, *budget, *minRuns)
	if err != nil {
		fmt.Fprintln(os.Stderr, "placement-bench:", err)
		os.Exit(1)
	}
	line, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "placement-bench:", err)
		os.Exit(1)
	}
	fmt.Println(string(line))
}

type fleetHeader struct {
	Now time.Time `json:"now"`
}

// readFleet decodes the fleet file into typed objects, one line at a time.
func readFleet(path string) (time.Time, []runtime.Object, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, nil, err
	}
	defer func() { _ = f.Close() }()
	var now time.Time
	var objects []runtime.Object
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for n := 1; scanner.Scan(); n++ {
		line := scanner.Bytes()
		var meta metav1.TypeMeta
		if err := json.Unmarshal(line, &meta); err != nil {
			return now, nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		var obj runtime.Object
		switch meta.Kind {
		case "FleetHeader":
			var h fleetHeader
			if err := json.Unmarshal(line, &h); err != nil {
				return now, nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			now = h.Now
			continue
		case "ManagedCluster":
			obj = &clusterapiv1.ManagedCluster{}
		case "ManagedClusterSet":
			obj = &clusterapiv1beta2.ManagedClusterSet{}
		case "ManagedClusterSetBinding":
			obj = &clusterapiv1beta2.ManagedClusterSetBinding{}
		case "Placement":
			obj = &clusterapiv1beta1.Placement{}
		case "PlacementDecision":
			obj = &clusterapiv1beta1.PlacementDecision{}
		case "AddOnPlacementScore":
			obj = &clusterapiv1alpha1.AddOnPlacementScore{}
		default:
			return now, nil, fmt.Errorf("%s:%d: unexpected kind %q", path, n, meta.Kind)
		}
		if err := json.Unmarshal(line, obj); err != nil {
			return now, nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		objects = append(objects, obj)
	}
	if err := scanner.Err(); err != nil {
		return now, nil, err
	}
	if now.IsZero() {
		return now, nil, fmt.Errorf("%s: no FleetHeader line", path)
	}
	return now, objects, nil
}

func run(fleetPath, placementKey string, budget time.Duration, minRuns int) (*result, error) {
	namespace, name, ok := strings.Cut(placementKey, "/")
	if !ok {
		return nil, fmt.Errorf("-placement %q is not namespace/name", placementKey)
	}
	now, objects, err := readFleet(fleetPath)
	if err != nil {
		return nil, err
	}
	// The AddOn prioritizer compares validUntil with this clock (OCM's own tests set it too).
	addon.AddOnClock = clocktesting.NewFakeClock(now)

	var placements []runtime.Object
	clusters, others := 0, 0
	for _, obj := range objects {
		switch o := obj.(type) {
		case *clusterapiv1beta1.Placement:
			placements = append(placements, o)
		case *clusterapiv1.ManagedCluster:
			clusters++
		case *clusterapiv1beta1.PlacementDecision:
			others++
		}
	}
	// The clientset holds the Placements (their status is patched); the informer stores hold all.
	client := clusterfake.NewSimpleClientset(placements...)
	informers := testinghelpers.NewClusterInformerFactory(client, objects...)
	objects, placements = nil, nil
	recorder := kevents.NewFakeRecorder(1024)
	scheduleMetrics := metrics.NewScheduleMetrics(clock.RealClock{})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	defer cancel()

	scheduler := scheduling.NewPluginScheduler(scheduling.NewSchedulerHandler(
		client,
		informers.Cluster().V1beta1().PlacementDecisions().Lister(),
		informers.Cluster().V1alpha1().AddOnPlacementScores().Lister(),
		informers.Cluster().V1().ManagedClusters().Lister(),
		recorder, scheduleMetrics,
	))
	controller := scheduling.NewSchedulingController(
		ctx,
		client,
		informers.Cluster().V1().ManagedClusters(),
		informers.Cluster().V1beta2().ManagedClusterSets(),
		informers.Cluster().V1beta2().ManagedClusterSetBindings(),
		informers.Cluster().V1beta1().Placements(),
		informers.Cluster().V1beta1().PlacementDecisions(),
		informers.Cluster().V1alpha1().AddOnPlacementScores(),
		scheduler,
		recorder, scheduleMetrics,
	)
	placement, err := informers.Cluster().V1beta1().Placements().Lister().Placements(namespace).Get(name)
	if err != nil {
		return nil, fmt.Errorf("placement %s: %w", placementKey, err)
	}

	// Undo a run's writes, untimed: its PlacementDecisions, its events and the recorded actions.
	reset := func() error {
		decisions, err := client.ClusterV1beta1().PlacementDecisions(namespace).List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{clusterapiv1beta1.PlacementLabel: name}).String(),
		})
		if err != nil {
			return err
		}
		for _, d := range decisions.Items {
			if err := client.ClusterV1beta1().PlacementDecisions(namespace).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
				return err
			}
		}
		for len(recorder.Events) > 0 {
			<-recorder.Events
		}
		client.ClearActions()
		return nil
	}

	var decided []string
	syncCtx := factory.NewSyncContext("placement-bench")
	syncTimes, err := sample(budget, minRuns, func() (time.Duration, error) {
		if err := reset(); err != nil {
			return 0, err
		}
		start := time.Now()
		err := controller.Sync(ctx, syncCtx, placementKey)
		elapsed := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("sync %s: %w", placementKey, err)
		}
		written, err := client.ClusterV1beta1().PlacementDecisions(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		decided = decided[:0]
		for _, d := range written.Items {
			if d.Labels[clusterapiv1beta1.PlacementLabel] != name {
				continue
			}
			for _, c := range d.Status.Decisions {
				decided = append(decided, c.ClusterName)
			}
		}
		return elapsed, nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(decided)

	all, err := informers.Cluster().V1().ManagedClusters().Lister().List(labels.Everything())
	if err != nil {
		return nil, err
	}
	scheduleTimes, err := sample(budget, minRuns, func() (time.Duration, error) {
		input := slices.Clone(all)
		start := time.Now()
		_, status := scheduler.Schedule(ctx, placement, input)
		elapsed := time.Since(start)
		if status.IsError() {
			return 0, fmt.Errorf("schedule %s: %s", placementKey, status.Message())
		}
		for len(recorder.Events) > 0 {
			<-recorder.Events
		}
		return elapsed, nil
	})
	if err != nil {
		return nil, err
	}

	peak, err := peakRSSMiB()
	if err != nil {
		return nil, err
	}
	return &result{
		Clusters:       clusters,
		Placement:      placementKey,
		Runs:           len(syncTimes),
		SyncMedianMs:   ms(syncTimes[len(syncTimes)/2]),
		SyncFastestMs:  ms(syncTimes[0]),
		ScheduleMedMs:  ms(scheduleTimes[len(scheduleTimes)/2]),
		Decisions:      decided,
		PeakRSSMiB:     peak,
		OtherDecisions: others,
	}, nil
}

// sample runs f at least minRuns times and while the runs took less than budget (at most 501),
// and returns its times sorted: the same rule as scheduler-core's placement benchmark.
func sample(budget time.Duration, minRuns int, f func() (time.Duration, error)) ([]time.Duration, error) {
	var times []time.Duration
	var spent time.Duration
	for len(times) < minRuns || (spent < budget && len(times) < 501) {
		d, err := f()
		if err != nil {
			return nil, err
		}
		times = append(times, d)
		spent += d
	}
	slices.Sort(times)
	return times, nil
}

func ms(d time.Duration) float64 {
	return float64(d.Nanoseconds()) / 1e6
}

// peakRSSMiB is the process's peak resident memory so far (VmHWM of /proc/self/status).
func peakRSSMiB() (float64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				kib, err := strconv.ParseFloat(fields[0], 64)
				if err != nil {
					return 0, err
				}
				return kib / 1024, nil
			}
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}
