package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/better-compute/kubernetes/shared/client"
)

// print writes v as --output asks: JSON or YAML of v as the API returns
// it, or the table that rows makes.
func (a *app) print(v any, header []string, rows [][]string) error {
	switch a.output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "%s\n", b)
		return err
	case "yaml":
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return err
		}
		_, err = a.stdout.Write(y)
		return err
	}
	return writeTable(a.stdout, header, rows)
}

func writeTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

var clusterHeader = []string{"NAME", "ID", "MODE", "REGION", "KUBERNETES", "STATE", "AGE", "MESSAGE"}

func clusterRow(c client.Cluster, now time.Time) []string {
	return []string{c.Name, c.ID, c.Mode, c.Region, orDash(c.KubernetesVersion), string(c.State), age(c.CreatedAt, now), c.Message}
}

// RUNNING is the pool's currentNodeCount, the nodes the provider runs in
// all its zones, beside NODES, what was asked (per zone).
var nodePoolHeader = []string{"NAME", "ID", "MACHINE TYPE", "NODES", "RUNNING", "ZONES", "STATE", "VERSION", "AGE", "MESSAGE"}

func nodePoolRow(p client.NodePool, now time.Time) []string {
	nodes := fmt.Sprint(p.NodeCount)
	if p.Autoscaling != nil {
		nodes += fmt.Sprintf(" (%d-%d)", p.Autoscaling.MinNodes, p.Autoscaling.MaxNodes)
	}
	running := "-"
	if p.CurrentNodeCount != nil {
		running = fmt.Sprint(*p.CurrentNodeCount)
	}
	zones := "-"
	if len(p.Zones) > 0 {
		zones = strings.Join(p.Zones, ",")
	}
	return []string{p.Name, p.ID, p.MachineType, nodes, running, zones, string(p.State), fmt.Sprint(p.Version), age(p.CreatedAt, now), p.Message}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age is kubectl's short age: 45s, 3m, 5h, 2d.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(max(d.Seconds(), 0)))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// keyValues parses "k=v,k2=v2" (a flag's value).
func keyValues(flag, s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, &usageError{fmt.Errorf("%s %q: want key=value[,key=value...]", flag, s)}
		}
		out[k] = v
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
