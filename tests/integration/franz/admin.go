package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type memberJoin struct {
	Version         int16              `json:"version"`
	Topics          []string           `json:"topics"`
	OwnedPartitions map[string][]int32 `json:"owned_partitions"`
	Generation      int32              `json:"generation"`
	UserDataLen     int                `json:"user_data_len"`
}

type memberOut struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	ClientID   string  `json:"client_id"`
	ClientHost string  `json:"client_host"`
	// What kadm decoded from the member's JoinGroup metadata and SyncGroup assignment
	// (null when the group is not a "consumer" group).
	Join     *memberJoin        `json:"join"`
	Assigned map[string][]int32 `json:"assigned"`
	// Raw sizes from our own DescribeGroups round trip, and whether the bytes decode as the
	// consumer protocol's structures without error.
	MetadataBytes   int    `json:"metadata_bytes"`
	AssignmentBytes int    `json:"assignment_bytes"`
	DecodeError     string `json:"decode_error,omitempty"`
}

type describeOutput struct {
	Group        string      `json:"group"`
	State        string      `json:"state"`
	ProtocolType string      `json:"protocol_type"`
	Protocol     string      `json:"protocol"`
	Coordinator  int32       `json:"coordinator"`
	Members      []memberOut `json:"members"`
	Error        string      `json:"error,omitempty"`
}

func adminClient(c *common) (*kgo.Client, *kadm.Client, error) {
	cl, err := kgo.NewClient(c.opts()...)
	if err != nil {
		return nil, nil, err
	}
	return cl, kadm.NewClient(cl), nil
}

func members(ms []kadm.DescribedGroupMember) []memberOut {
	out := []memberOut{}
	for _, m := range ms {
		mo := memberOut{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID,
			ClientHost: m.ClientHost, Assigned: map[string][]int32{}}
		if j, ok := m.Join.AsConsumer(); ok {
			mo.Join = &memberJoin{Version: j.Version, Topics: j.Topics, OwnedPartitions: map[string][]int32{},
				Generation: j.Generation, UserDataLen: len(j.UserData)}
			if mo.Join.Topics == nil {
				mo.Join.Topics = []string{}
			}
			for _, op := range j.OwnedPartitions {
				mo.Join.OwnedPartitions[op.Topic] = sorted32(op.Partitions)
			}
		}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				mo.Assigned[t.Topic] = sorted32(append(mo.Assigned[t.Topic], t.Partitions...))
			}
		}
		out = append(out, mo)
	}
	return out
}

// rawCheck describes the group again with a plain DescribeGroups request and decodes every
// member's bytes strictly (kadm ignores decode errors), filling the byte counts and errors.
func rawCheck(ctx context.Context, cl *kgo.Client, group string, ms []memberOut) error {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	byID := map[string]*memberOut{}
	for i := range ms {
		byID[ms[i].MemberID] = &ms[i]
	}
	for _, g := range resp.Groups {
		if g.ProtocolType != "consumer" {
			continue
		}
		for _, rm := range g.Members {
			mo := byID[rm.MemberID]
			if mo == nil {
				continue // the group changed between the two requests
			}
			mo.MetadataBytes, mo.AssignmentBytes = len(rm.ProtocolMetadata), len(rm.MemberAssignment)
			var meta kmsg.ConsumerMemberMetadata
			if err := meta.ReadFrom(rm.ProtocolMetadata); err != nil {
				mo.DecodeError = fmt.Sprintf("member metadata: %v", err)
			}
			var asg kmsg.ConsumerMemberAssignment
			// An empty assignment is legal for a member that has not synced yet.
			if len(rm.MemberAssignment) > 0 {
				if err := asg.ReadFrom(rm.MemberAssignment); err != nil {
					mo.DecodeError = fmt.Sprintf("member assignment: %v", err)
				}
			}
		}
	}
	return nil
}

func runDescribe(args []string) int {
	fs := flag.NewFlagSet("describe", flag.ContinueOnError)
	var c common
	c.register(fs, 30*time.Second)
	group := fs.String("group", "", "group id (required)")
	parse(fs, args, map[string]*string{"brokers": &c.brokers, "group": group})
	out := describeOutput{Group: *group, Members: []memberOut{}}
	watchdog("describe", c.timeout, func(msg string) any { o := out; o.Error = msg; return o })

	cl, adm, err := adminClient(&c)
	if err != nil {
		out.Error = err.Error()
		return fail("describe", out, "client: %v", err)
	}
	defer cl.Close()
	ctx := context.Background()
	described, err := adm.DescribeGroups(ctx, *group)
	if err != nil {
		out.Error = err.Error()
		return fail("describe", out, "DescribeGroups: %v", err)
	}
	g, ok := described[*group]
	if !ok {
		out.Error = "group missing from the DescribeGroups response"
		return fail("describe", out, "%s", out.Error)
	}
	out.State, out.ProtocolType, out.Protocol = g.State, g.ProtocolType, g.Protocol
	out.Coordinator = g.Coordinator.NodeID
	out.Members = members(g.Members)
	if g.Err != nil {
		out.Error = g.Err.Error()
		return fail("describe", out, "group %s: %v %s", *group, g.Err, g.ErrMessage)
	}
	if err := rawCheck(ctx, cl, *group, out.Members); err != nil {
		out.Error = err.Error()
		return fail("describe", out, "raw DescribeGroups: %v", err)
	}
	emit(out)
	return 0
}

type lagPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"` // -1: no commit
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
	MemberID  string `json:"member_id"` // "" when no member holds the partition
	ClientID  string `json:"client_id"`
	Error     string `json:"error,omitempty"`
}

type lagOutput struct {
	Group        string           `json:"group"`
	State        string           `json:"state"`
	ProtocolType string           `json:"protocol_type"`
	Protocol     string           `json:"protocol"`
	Members      []memberOut      `json:"members"`
	Partitions   []lagPartition   `json:"partitions"` // sorted by topic, partition
	TotalLag     int64            `json:"total_lag"`
	TopicLag     map[string]int64 `json:"topic_lag"`
	Error        string           `json:"error,omitempty"`
}

func runLag(args []string) int {
	fs := flag.NewFlagSet("lag", flag.ContinueOnError)
	var c common
	c.register(fs, 30*time.Second)
	group := fs.String("group", "", "group id (required)")
	parse(fs, args, map[string]*string{"brokers": &c.brokers, "group": group})
	out := lagOutput{Group: *group, Members: []memberOut{}, Partitions: []lagPartition{}, TopicLag: map[string]int64{}}
	watchdog("lag", c.timeout, func(msg string) any { o := out; o.Error = msg; return o })

	cl, adm, err := adminClient(&c)
	if err != nil {
		out.Error = err.Error()
		return fail("lag", out, "client: %v", err)
	}
	defer cl.Close()
	lags, err := adm.Lag(context.Background(), *group)
	if err != nil {
		out.Error = err.Error()
		return fail("lag", out, "Lag: %v", err)
	}
	l, ok := lags[*group]
	if !ok {
		out.Error = "group missing from the lag result"
		return fail("lag", out, "%s", out.Error)
	}
	out.State, out.ProtocolType, out.Protocol = l.State, l.ProtocolType, l.Protocol
	out.Members = members(l.Members)
	if err := rawCheck(context.Background(), cl, *group, out.Members); err != nil {
		out.Error = err.Error()
		return fail("lag", out, "raw DescribeGroups: %v", err)
	}
	if l.DescribeErr != nil {
		out.Error = "describe: " + l.DescribeErr.Error()
		return fail("lag", out, "%s", out.Error)
	}
	if l.FetchErr != nil {
		out.Error = "offset fetch: " + l.FetchErr.Error()
		return fail("lag", out, "%s", out.Error)
	}
	var partErrs []string
	for _, ml := range l.Lag.Sorted() {
		lp := lagPartition{Topic: ml.Topic, Partition: ml.Partition, Committed: ml.Commit.At,
			Start: ml.Start.Offset, End: ml.End.Offset, Lag: ml.Lag}
		if ml.Member != nil {
			lp.MemberID, lp.ClientID = ml.Member.MemberID, ml.Member.ClientID
		}
		if ml.Err != nil {
			lp.Error = ml.Err.Error()
			partErrs = append(partErrs, fmt.Sprintf("%s[%d]: %v", ml.Topic, ml.Partition, ml.Err))
		}
		out.Partitions = append(out.Partitions, lp)
	}
	sort.Slice(out.Partitions, func(i, j int) bool {
		a, b := out.Partitions[i], out.Partitions[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	for t, tl := range l.Lag.TotalByTopic() {
		out.TopicLag[t] = tl.Lag
	}
	out.TotalLag = l.Lag.Total()
	if len(partErrs) > 0 {
		out.Error = fmt.Sprintf("partition errors: %v", partErrs)
		return fail("lag", out, "%s", out.Error)
	}
	emit(out)
	return 0
}

func sorted32(ps []int32) []int32 {
	out := append([]int32{}, ps...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
