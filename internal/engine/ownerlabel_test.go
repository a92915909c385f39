package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestValidOwner(t *testing.T) {
	for owner, want := range map[string]bool{
		"":                          true,
		"team-payments":             true,
		"payments@example.com":      true,
		"a":                         true,
		"a+b_c.d":                   true,
		strings.Repeat("a", 63):     true,
		strings.Repeat("a", 64):     false,
		"-team":                     false,
		"team-":                     false,
		OtherOwner:                  false,
		"team payments":             false,
		"team\"}":                   false,
		"équipe":                    false,
		"team/payments":             false,
		"payments@example.com\nx=1": false,
	} {
		if got := validOwner(owner); got != want {
			t.Errorf("validOwner(%q) = %v, want %v", owner, got, want)
		}
	}
}

func TestOwnerLabelsAreBounded(t *testing.T) {
	const max = 3
	tests := []struct {
		name   string
		owners []string
		want   []string
	}{
		{"no owner is no label", []string{"", ""}, []string{"", ""}},
		{"the first owners keep their value, again and again", []string{"a", "b", "a", "c", "b"}, []string{"a", "b", "a", "c", "b"}},
		{"past the cap a new owner is other; known ones stay", []string{"a", "b", "c", "d", "a", "e", "c"}, []string{"a", "b", "c", OtherOwner, "a", OtherOwner, "c"}},
		{"an invalid owner is other and takes no place", []string{"bad owner", "a", "b", "c", "d"}, []string{OtherOwner, "a", "b", "c", OtherOwner}},
		{"no owner takes no place", []string{"", "a", "", "b", "c", ""}, []string{"", "a", "", "b", "c", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOwnerLabels(max)
			for i, owner := range tt.owners {
				if got := o.value(owner); got != tt.want[i] {
					t.Fatalf("value #%d (%q) = %q, want %q", i, owner, got, tt.want[i])
				}
			}
		})
	}
}

// TestExhaustionCounterSeriesAreBounded: however many owners exhaust
// deliveries, the counter holds at most MaxOwnerLabels owners (plus
// OtherOwner and no owner) per reason.
func TestExhaustionCounterSeriesAreBounded(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), nil)
	// The counter alone: the per-endpoint collector needs a store.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.exhausted)
	reasons := []ledger.ExhaustReason{ledger.ExhaustMaxAttempts, ledger.ExhaustGone}
	for i := range 5 * MaxOwnerLabels {
		for _, r := range reasons {
			m.observeExhausted(r, fmt.Sprintf("team-%d", i))
		}
	}
	m.observeExhausted(ledger.ExhaustMaxAttempts, "")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]bool{}
	series := 0
	var total float64
	for _, f := range families {
		if f.GetName() != "hookkeeper_deliveries_exhausted_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			series++
			total += s.GetCounter().GetValue()
			for _, l := range s.GetLabel() {
				if l.GetName() == "owner" {
					owners[l.GetValue()] = true
				}
			}
		}
	}
	if len(owners) != MaxOwnerLabels+2 || !owners[OtherOwner] || !owners[""] || !owners["team-0"] || owners[fmt.Sprintf("team-%d", MaxOwnerLabels)] {
		t.Fatalf("%d owner values (team-0 %v, other %v, none %v), want the first %d, %s and none",
			len(owners), owners["team-0"], owners[OtherOwner], owners[""], MaxOwnerLabels, OtherOwner)
	}
	if want := len(reasons)*(MaxOwnerLabels+1) + 1; series != want {
		t.Fatalf("%d series, want %d", series, want)
	}
	// Nothing is lost: every exhaustion is counted, under some owner.
	if want := float64(len(reasons)*5*MaxOwnerLabels + 1); total != want {
		t.Fatalf("counted %v exhaustions, want %v", total, want)
	}
}

// TestOwnerPatternIsTheCRDs keeps ownerPattern and its length bound equal to
// the CRD's validation of spec.owner, which is written as a marker and
// cannot name the Go value.
func TestOwnerPatternIsTheCRDs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "hookkeeper.dev_webhookendpoints.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\n {14}owner:\n.*?maxLength: (\d+)\n.*?pattern: (\S+)\n`).FindSubmatch(data)
	if m == nil {
		t.Fatal("no spec.owner with maxLength and pattern in the CRD")
	}
	if string(m[2]) != ownerPattern.String() || string(m[1]) != "63" {
		t.Errorf("the CRD's owner: maxLength %s, pattern %s\nownerlabel.go: 63, %s", m[1], m[2], ownerPattern)
	}
}
