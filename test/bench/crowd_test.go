package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCrowdEndpointsFile(t *testing.T) {
	cc := crowdConfig{endpoints: 25, namespaces: 4}
	for _, crowd := range []bool{false, true} {
		path, err := crowdEndpointsFile(t.TempDir(), "http://127.0.0.1:1/hook", cc, crowd)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var eps []struct {
			Namespace, Name string
			MaxInFlight     int
		}
		if err := json.Unmarshal(data, &eps); err != nil {
			t.Fatal(err)
		}
		want := 1
		if crowd {
			want += cc.endpoints
		}
		if len(eps) != want {
			t.Fatalf("crowd %v: %d endpoints, want %d", crowd, len(eps), want)
		}
		if eps[0].Namespace != "bench" || eps[0].MaxInFlight != 512 {
			t.Errorf("crowd %v: the published endpoint is %+v, want the cost step's", crowd, eps[0])
		}
		namespaces, names := map[string]bool{}, map[string]bool{}
		for _, ep := range eps[1:] {
			if ep.Namespace == "bench" || ep.MaxInFlight != crowdMaxInFlight {
				t.Errorf("crowd endpoint %+v: want another namespace and the default limit %d", ep, crowdMaxInFlight)
			}
			namespaces[ep.Namespace], names[ep.Namespace+"/"+ep.Name] = true, true
		}
		if crowd && (len(namespaces) != cc.namespaces || len(names) != cc.endpoints) {
			t.Errorf("crowd: %d namespaces and %d distinct endpoints, want %d and %d", len(namespaces), len(names), cc.namespaces, cc.endpoints)
		}
	}
}

func TestCrowdRatioIsTakenRoundByRound(t *testing.T) {
	run := func(engine, server time.Duration) costRun { return costRun{engineCPU: engine, serverCPU: server} }
	r := crowdRun{
		store: "postgres",
		alone: []costRun{run(time.Millisecond, time.Millisecond), run(2*time.Millisecond, 2*time.Millisecond)},
		crowd: []costRun{run(1100*time.Microsecond, 1100*time.Microsecond), run(2*time.Millisecond, 4*time.Millisecond)},
	}
	// Round 1: 2.2 / 2 = 1.1; round 2: 6 / 4 = 1.5 (the server's CPU counts).
	got := r.ratio()
	if got.lo < 1.0999 || got.lo > 1.1001 || got.hi != 1.5 || got.median < 1.2999 || got.median > 1.3001 {
		t.Errorf("ratio = %+v, want 1.1–1.5, median 1.3", got)
	}
	md := (&crowdResults{endpoints: 10_000, namespaces: 40, duration: time.Second, runs: []crowdRun{r}}).markdown("test machine")
	for _, want := range []string{crowdHeading, "| postgres | saturation |", "1.30× (1.10×–1.50×)", "**misses**"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestCrowdLabelsNameSchemas: every run's label makes a PostgreSQL schema
// name (postgresLedgers) within the 63 bytes of an identifier.
func TestCrowdLabelsNameSchemas(t *testing.T) {
	for _, rate := range []int{500, 0} {
		for _, crowd := range []bool{false, true} {
			var schemas []string
			args, _, _ := postgresLedgers("postgres://unused", &schemas)(crowdLabel("postgres", rate, crowd, 9))
			schema := schemas[0]
			if !slices.Contains(args, schema) {
				t.Fatalf("enginehost's arguments %v do not name the schema %q", args, schema)
			}
			if len(schema) > 63 {
				t.Errorf("schema %q: %d bytes, want at most 63", schema, len(schema))
			}
		}
	}
}
