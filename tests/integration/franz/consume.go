package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/signal"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type consumedRecord struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
}

type consumeOutput struct {
	Group    string `json:"group"`
	Topic    string `json:"topic"`
	MemberID string `json:"member_id"`
	ClientID string `json:"client_id"`
	Received int    `json:"received"`
	// Values in the order they were taken (per partition in offset order).
	Values  []string         `json:"values"`
	Records []consumedRecord `json:"records"`
	// Every partition this member was ever assigned, and the assignment it held last.
	EverAssigned []int32 `json:"ever_assigned"`
	Assigned     []int32 `json:"assigned"`
	Assignments  int     `json:"assignments"` // how many times partitions were assigned
	// The offsets this member committed (next offset to read), by partition.
	Committed map[string]int64 `json:"committed"`
	// "count" (got --count records), "signal" (SIGTERM/SIGINT), or "error".
	StoppedBy string  `json:"stopped_by"`
	ElapsedS  float64 `json:"elapsed_s"`
	Error     string  `json:"error,omitempty"`
}

func runConsumeGroup(args []string) int {
	fs := flag.NewFlagSet("consume-group", flag.ContinueOnError)
	var c common
	c.register(fs, 60*time.Second)
	group := fs.String("group", "", "group id (required)")
	topic := fs.String("topic", "", "topic (required)")
	count := fs.Int("count", 0, "stop after this many records (required, > 0)")
	commit := fs.Bool("commit", false, "commit the offsets of the records taken, synchronously after every poll")
	maxPer := fs.Int("max-per-partition", 0, "take at most this many records from each partition (0: no cap)")
	linger := fs.Bool("linger", false, "after --count records, stay in the group until SIGTERM/SIGINT")
	balancer := fs.String("balancer", "cooperative-sticky", "cooperative-sticky, sticky, range or roundrobin")
	session := fs.Duration("session-timeout", 6*time.Second, "session timeout")
	heartbeat := fs.Duration("heartbeat", 500*time.Millisecond, "heartbeat interval")
	parse(fs, args, map[string]*string{"brokers": &c.brokers, "group": group, "topic": topic})
	if *count <= 0 {
		fmt.Fprintln(fs.Output(), "franz-it consume-group: --count must be > 0")
		return 2
	}
	var bal kgo.GroupBalancer
	switch *balancer {
	case "cooperative-sticky":
		bal = kgo.CooperativeStickyBalancer()
	case "sticky":
		bal = kgo.StickyBalancer()
	case "range":
		bal = kgo.RangeBalancer()
	case "roundrobin":
		bal = kgo.RoundRobinBalancer()
	default:
		fmt.Fprintf(fs.Output(), "franz-it consume-group: unknown --balancer %q\n", *balancer)
		return 2
	}

	var mu sync.Mutex
	out := consumeOutput{Group: *group, Topic: *topic, ClientID: c.clientID, Values: []string{},
		Records: []consumedRecord{}, EverAssigned: []int32{}, Assigned: []int32{},
		Committed: map[string]int64{}}
	ever, current := map[int32]bool{}, map[int32]bool{}
	began := time.Now()
	var cl *kgo.Client
	snapshot := func(errMsg string) any {
		mu.Lock()
		defer mu.Unlock()
		o := out
		o.EverAssigned, o.Assigned = sortedKeys(ever), sortedKeys(current)
		if cl != nil {
			o.MemberID, _ = cl.GroupMetadata()
		}
		o.ElapsedS = time.Since(began).Seconds()
		if errMsg != "" {
			o.Error, o.StoppedBy = errMsg, "error"
		}
		return o
	}
	watchdog("consume-group", c.timeout, snapshot)

	opts := append(c.opts(),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// Commits happen between polls and rebalances wait for them, so a partition never
		// moves with processed-but-uncommitted records on it.
		kgo.BlockRebalanceOnPoll(),
		kgo.Balancers(bal),
		kgo.SessionTimeout(*session),
		kgo.HeartbeatInterval(*heartbeat),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			out.Assignments++
			for _, p := range m[*topic] {
				ever[p], current[p] = true, true
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[*topic] {
				delete(current, p)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[*topic] {
				delete(current, p)
			}
		}),
	)
	var err error
	cl, err = kgo.NewClient(opts...)
	if err != nil {
		return fail("consume-group", snapshot(err.Error()), "client: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	taken := map[int32]int{}
	stoppedBy := ""
	var loopErr error
	for stoppedBy == "" && loopErr == nil {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			stoppedBy = "signal"
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, kgo.ErrClientClosed) {
				continue
			}
			loopErr = fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		var keep []*kgo.Record
		mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) {
			if len(out.Records)+len(keep) >= *count || (*maxPer > 0 && taken[r.Partition] >= *maxPer) {
				return
			}
			taken[r.Partition]++
			keep = append(keep, r)
		})
		for _, r := range keep {
			out.Records = append(out.Records, consumedRecord{r.Partition, r.Offset, string(r.Value)})
			out.Values = append(out.Values, string(r.Value))
		}
		out.Received = len(out.Records)
		done := out.Received >= *count
		mu.Unlock()
		if *commit && len(keep) > 0 {
			// A fresh context: a signal arriving mid-batch must not drop this commit.
			cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			err := cl.CommitRecords(cctx, keep...)
			cancel()
			if err != nil {
				loopErr = fmt.Errorf("commit: %w", err)
			} else {
				mu.Lock()
				for _, r := range keep {
					key := strconv.Itoa(int(r.Partition))
					if next := r.Offset + 1; next > out.Committed[key] {
						out.Committed[key] = next
					}
				}
				mu.Unlock()
			}
		}
		cl.AllowRebalance()
		if done && stoppedBy == "" {
			stoppedBy = "count"
		}
	}
	if loopErr == nil && stoppedBy == "count" && *linger {
		<-ctx.Done()
	}
	mu.Lock()
	out.StoppedBy = stoppedBy
	out.MemberID, _ = cl.GroupMetadata()
	mu.Unlock()
	final := snapshot("")
	// Leaves the group (LeaveGroup), so the group is Empty once this returns.
	cl.CloseAllowingRebalance()
	if loopErr != nil {
		o := final.(consumeOutput)
		o.Error, o.StoppedBy = loopErr.Error(), "error"
		return fail("consume-group", o, "%v", loopErr)
	}
	emit(final)
	return 0
}

func sortedKeys(m map[int32]bool) []int32 {
	ks := make([]int32, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}
