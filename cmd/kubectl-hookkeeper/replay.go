package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

func (p *plugin) replayCommand() *cobra.Command {
	var (
		since, until, onUnreplayable string
		types                        []string
		limit                        int
		timeout                      time.Duration
		out                          *outputFlags
	)
	cmd := &cobra.Command{
		Use:   "replay ENDPOINT --since 09:00|2h|RFC3339 --types 'order.*'",
		Short: "Create a DeliveryRecovery that replays a window of events to ENDPOINT and follow it",
		Long: `Create a DeliveryRecovery with action Replay that sends ENDPOINT the events of
its namespace created since --since (and before --until, else before it
starts) whose type matches --types, oldest first, under their own event IDs
(webhook-id), even if ENDPOINT was created after them. Print each change of
its counts until it is Complete (exit 0) or Failed (exit 1). With -o, print
the recovery as it ended instead.

--since and --until take a time of day (09:00, today in the local time
zone), a duration (2h: that long ago) or an RFC 3339 time.`,
		Args: exactlyOne("ENDPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := replaySpec(args[0], since, until, types, onUnreplayable, limit, time.Now())
			if err != nil {
				return err
			}
			if err := positiveTimeout(timeout); err != nil {
				return err
			}
			s, err := p.open(out)
			if err != nil {
				return err
			}
			return p.recoverEndpoint(cmd.Context(), s, spec, timeout, 500*time.Millisecond)
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "Events created at or after this time (required): 09:00, 2h or RFC 3339.")
	cmd.Flags().StringVar(&until, "until", "", "Events created before this time (default: when the replay starts).")
	cmd.Flags().StringSliceVar(&types, "types", nil, "Event types or prefix.* patterns, comma-separated (required).")
	cmd.Flags().StringVar(&onUnreplayable, "on-unreplayable", "Refuse", "Refuse or Reissue the events that cannot be sent under their own identity.")
	cmd.Flags().IntVar(&limit, "limit", 0, "At most this many events (default: the API's).")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "How long to follow the replay.")
	out = addOutputFlags(cmd, false)
	return cmd
}

// replaySpec builds the DeliveryRecovery the replay verb creates, refusing
// flags the API would refuse, with the flag named.
func replaySpec(endpoint, since, until string, types []string, onUnreplayable string, limit int, now time.Time) (hookv1.DeliveryRecoverySpec, error) {
	spec := hookv1.DeliveryRecoverySpec{EndpointRef: hookv1.LocalObjectReference{Name: endpoint}, Action: hookv1.RecoveryModeReplay}
	if since == "" {
		return spec, errors.New("--since is required: 09:00, 2h or an RFC 3339 time")
	}
	from, err := pointInTime(since, now)
	if err != nil {
		return spec, fmt.Errorf("--since %q: %w", since, err)
	}
	rp := &hookv1.ReplaySpec{Since: metav1.NewTime(from)}
	if until != "" {
		to, err := pointInTime(until, now)
		if err != nil {
			return spec, fmt.Errorf("--until %q: %w", until, err)
		}
		if !from.Before(to) {
			return spec, fmt.Errorf("--until %q: must be later than --since", until)
		}
		t := metav1.NewTime(to)
		rp.Until = &t
	}
	if len(types) == 0 {
		return spec, errors.New("--types is required: event types or prefix.* patterns, e.g. 'order.*'")
	}
	for _, t := range types {
		rp.EventTypes = append(rp.EventTypes, hookv1.EventTypePattern(strings.TrimSpace(t)))
	}
	switch hookv1.ReplayFallback(onUnreplayable) {
	case hookv1.ReplayFallbackRefuse, hookv1.ReplayFallbackReissue:
		rp.OnUnreplayable = hookv1.ReplayFallback(onUnreplayable)
	default:
		return spec, fmt.Errorf("--on-unreplayable %q: must be Refuse or Reissue", onUnreplayable)
	}
	if limit < 0 {
		return spec, fmt.Errorf("--limit %d: must be positive", limit)
	}
	if limit > 0 {
		l := int32(limit)
		spec.Limit = &l
	}
	spec.Replay = rp
	return spec, nil
}

var timeOfDay = regexp.MustCompile(`^([01]?[0-9]|2[0-3]):([0-5][0-9])$`)

// pointInTime reads a time of day (today in now's location), a duration
// before now, or an RFC 3339 time; a time after now is refused, since no
// event was created then yet.
func pointInTime(s string, now time.Time) (time.Time, error) {
	var t time.Time
	if m := timeOfDay.FindStringSubmatch(s); m != nil {
		h, _ := strconv.Atoi(m[1])
		mins, _ := strconv.Atoi(m[2])
		y, mo, d := now.Date()
		t = time.Date(y, mo, d, h, mins, 0, 0, now.Location())
	} else if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return t, errors.New("a duration must be positive (that long ago)")
		}
		t = now.Add(-d)
	} else if t, err = time.Parse(time.RFC3339, s); err != nil {
		return t, errors.New("not a time of day (09:00), a duration (2h) or an RFC 3339 time")
	}
	if t.After(now) {
		return t, errors.New("is in the future")
	}
	// The API keeps whole seconds.
	return t.Truncate(time.Second), nil
}
