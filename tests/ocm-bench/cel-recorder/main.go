// Command cel-recorder records, for each CEL expression of scheduler-core/tests/cel_vectors.tsv,
// the outcome OCM's own placement CEL environment gives it on the vectors' cluster, and writes the
// vectors file again: the same header (its versions read from this build) and the same order.
//
//	cel-recorder -in scheduler-core/tests/cel_vectors.tsv > cel_vectors.tsv
//
// Only the expressions of the input are read; its outcomes are ignored. Outcomes:
//
//   - misconfigured: OCM's CELSelector.Compile reports a compile or instantiation error;
//   - error: OCM's EvaluateSingleExpression returns no value (a runtime error or the cost budget);
//   - true: the value is the boolean true (the cluster is selected);
//   - false: any other value (false, or not a boolean).
//
// Each outcome is checked against OCM's CELSelector.Validate on the same cluster: it selects exactly
// when the outcome is true, or the recorder fails.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/klog/v2"

	clusterfake "open-cluster-management.io/api/client/cluster/clientset/versioned/fake"
	clusterapiv1 "open-cluster-management.io/api/cluster/v1"
	clusterapiv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	ocmcelcommon "open-cluster-management.io/sdk-go/pkg/cel/common"

	commonhelpers "open-cluster-management.io/ocm/pkg/common/helpers"
	placementhelpers "open-cluster-management.io/ocm/pkg/placement/helpers"
	testinghelpers "open-cluster-management.io/ocm/pkg/placement/helpers/testing"
)

// The header's text; %s are the versions of cel-go, OCM, sdk-go and k8s.io/apiserver in this build.
const header = `# CEL vectors: one expression per line, after the outcome OCM's CEL environment gives it on the
# cluster of cel_vectors.rs (labels version=1.29.4 zone=us-east-1a mem=64Gi addr=10.0.3.7 env=prod
# owner=team-a, claims cloud=Amazon region=eu, AddOnPlacementScore "res" = [cpu 60, mem -5]).
# Outcomes: true (selects), false (evaluates to false or to a non-bool), error (runtime error: does
# not select), misconfigured (compile or instantiation error). Recorded by evaluating each line with
# cel-go %s in OCM %s's environment (sdk-go %s BaseEnvOpts, k8s.io/apiserver %s
# libraries) on the same cluster; scalar results were turned into ` + "`(expr) == <result>`" + `.
`

func main() {
	in := flag.String("in", "", "the vectors file whose expressions to record (outcomes are ignored)")
	flag.Parse()
	if *in == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: cel-recorder -in cel_vectors.tsv > cel_vectors.tsv")
		os.Exit(2)
	}
	expressions, err := readExpressions(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	if err := record(out, expressions); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// readExpressions returns the expression of every vector line (`outcome<TAB>expression`), in order.
func readExpressions(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var expressions []string
	for n, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		_, expression, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("%s:%d: not outcome<TAB>expression: %q", path, n+1, line)
		}
		expressions = append(expressions, expression)
	}
	return expressions, nil
}

// versions of the modules named in the header, from this binary's build information.
func versions() ([4]string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return [4]string{}, fmt.Errorf("no build information in this binary")
	}
	wanted := [4]string{"github.com/google/cel-go", "open-cluster-management.io/ocm", "open-cluster-management.io/sdk-go", "k8s.io/apiserver"}
	var found [4]string
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		for i, path := range wanted {
			if dep.Path == path {
				found[i] = dep.Version
			}
		}
	}
	for i, v := range found {
		if v == "" {
			return found, fmt.Errorf("%s is not in this binary's build information", wanted[i])
		}
	}
	return found, nil
}

// The cluster the vectors are evaluated on, as the header and cel_vectors.rs describe it.
func vectorsCluster() (*clusterapiv1.ManagedCluster, *clusterapiv1alpha1.AddOnPlacementScore) {
	cluster := &clusterapiv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: "alpha-1",
			Labels: map[string]string{
				"version": "1.29.4", "zone": "us-east-1a", "mem": "64Gi",
				"addr": "10.0.3.7", "env": "prod", "owner": "team-a",
			},
		},
		Spec: clusterapiv1.ManagedClusterSpec{HubAcceptsClient: true},
		Status: clusterapiv1.ManagedClusterStatus{
			ClusterClaims: []clusterapiv1.ManagedClusterClaim{
				{Name: "cloud", Value: "Amazon"},
				{Name: "region", Value: "eu"},
			},
		},
	}
	score := &clusterapiv1alpha1.AddOnPlacementScore{
		ObjectMeta: metav1.ObjectMeta{Name: "res", Namespace: "alpha-1"},
		Status: clusterapiv1alpha1.AddOnPlacementScoreStatus{
			Scores: []clusterapiv1alpha1.AddOnPlacementScoreItem{
				{Name: "cpu", Value: 60},
				{Name: "mem", Value: -5},
			},
		},
	}
	return cluster, score
}

func record(out io.Writer, expressions []string) error {
	v, err := versions()
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(out, header, v[0], v[1], v[2], v[3]); err != nil {
		return err
	}

	cluster, score := vectorsCluster()
	client := clusterfake.NewSimpleClientset()
	informers := testinghelpers.NewClusterInformerFactory(client, cluster, score)
	env, err := placementhelpers.NewEnv(informers.Cluster().V1alpha1().AddOnPlacementScores().Lister())
	if err != nil {
		return fmt.Errorf("OCM's CEL environment: %w", err)
	}
	converted, err := ocmcelcommon.ConvertObjectToUnstructured(cluster)
	if err != nil {
		return fmt.Errorf("converting the cluster: %w", err)
	}
	input := map[string]any{"managedCluster": converted.Object}
	// OCM logs every failed evaluation; the outcome column says it already.
	ctx := klog.NewContext(context.Background(), logr.Discard())

	for _, expression := range expressions {
		selector := placementhelpers.NewCELSelector(env, []string{expression}, nil)
		compiled := selector.Compile()[0]
		var outcome string
		switch {
		case compiled.Error != nil || compiled.Program == nil:
			outcome = "misconfigured"
		default:
			// The budget OCM's CELSelector starts each cluster with.
			value, _ := commonhelpers.EvaluateSingleExpression(ctx, compiled.Program, int64(celconfig.RuntimeCELCostBudget), expression, input)
			switch {
			case value == nil:
				outcome = "error"
			case value.Value() == true:
				outcome = "true"
			default:
				outcome = "false"
			}
		}
		if selects, _ := selector.Validate(ctx, cluster); selects != (outcome == "true") {
			return fmt.Errorf("%s: recorded %s, but OCM's CELSelector.Validate says selects=%t", expression, outcome, selects)
		}
		if _, err := fmt.Fprintf(out, "%s\t%s\n", outcome, expression); err != nil {
			return err
		}
	}
	return nil
}
