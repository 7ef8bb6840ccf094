package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type partitionResult struct {
	Count   int     `json:"count"`
	Offsets []int64 `json:"offsets"` // in produce order
}

type produceOutput struct {
	Topic      string                      `json:"topic"`
	Requested  int                         `json:"requested"`
	Acked      int                         `json:"acked"`
	ErrorCount int                         `json:"error_count"`
	Errors     []string                    `json:"errors"` // distinct messages, at most 20
	ProducerID int64                       `json:"producer_id"`
	Epochs     []int16                     `json:"producer_epochs"` // distinct epochs seen on acked records
	Partitions map[string]*partitionResult `json:"partitions"`
	// Connection trouble seen by the client: a SIGKILLed broker shows up here.
	Disconnects   int64   `json:"disconnects"`
	ConnectErrors int64   `json:"connect_errors"`
	ElapsedS      float64 `json:"elapsed_s"`
	Error         string  `json:"error,omitempty"`
}

// connHooks counts disconnects and failed dials.
type connHooks struct{ disconnects, connectErrors atomic.Int64 }

func (h *connHooks) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { h.disconnects.Add(1) }
func (h *connHooks) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.connectErrors.Add(1)
	}
}

func runProduce(args []string) int {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	var c common
	c.register(fs, 90*time.Second)
	topic := fs.String("topic", "", "topic (required)")
	count := fs.Int("count", 0, "number of records (required, > 0)")
	start := fs.Int("start", 0, "first sequence number in the values")
	partition := fs.Int("partition", -1, "produce every record to this partition (default: franz-go's partitioner)")
	spread := fs.Int("spread", 0, "record i goes to partition i % K (overrides --partition)")
	linger := fs.Duration("linger", 0, "producer linger")
	interval := fs.Duration("interval", 0, "pause between records (to keep a stream going for a while)")
	parse(fs, args, map[string]*string{"brokers": &c.brokers, "topic": topic})
	if *count <= 0 {
		fmt.Fprintln(fs.Output(), "franz-it produce: --count must be > 0")
		return 2
	}

	hooks := &connHooks{}
	opts := append(c.opts(),
		kgo.DefaultProduceTopic(*topic),
		// Idempotence stays on (franz-go's default); acks=all is the default too, but is
		// the point of the test, so it is spelled out.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(*linger),
		kgo.WithHooks(hooks),
	)
	if *spread > 0 || *partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fail("produce", produceOutput{Error: err.Error()}, "client: %v", err)
	}
	defer cl.Close()

	type result struct {
		done      bool
		err       error
		partition int32
		offset    int64
		pid       int64
		epoch     int16
	}
	var mu sync.Mutex
	results := make([]result, *count)
	began := time.Now()

	summarize := func(errMsg string) produceOutput {
		mu.Lock()
		defer mu.Unlock()
		out := produceOutput{Topic: *topic, Requested: *count, ProducerID: -1, Errors: []string{},
			Epochs: []int16{}, Partitions: map[string]*partitionResult{}, Error: errMsg,
			Disconnects: hooks.disconnects.Load(), ConnectErrors: hooks.connectErrors.Load(),
			ElapsedS: time.Since(began).Seconds()}
		seenErr, seenEpoch := map[string]bool{}, map[int16]bool{}
		for _, r := range results {
			if !r.done {
				continue
			}
			if r.err != nil {
				out.ErrorCount++
				if msg := r.err.Error(); !seenErr[msg] && len(out.Errors) < 20 {
					seenErr[msg] = true
					out.Errors = append(out.Errors, msg)
				}
				continue
			}
			out.Acked++
			if out.ProducerID == -1 {
				out.ProducerID = r.pid
			} else if out.ProducerID != r.pid && out.Error == "" {
				out.Error = fmt.Sprintf("records acked under two producer ids, %d and %d", out.ProducerID, r.pid)
			}
			if !seenEpoch[r.epoch] {
				seenEpoch[r.epoch] = true
				out.Epochs = append(out.Epochs, r.epoch)
			}
			key := strconv.Itoa(int(r.partition))
			pr := out.Partitions[key]
			if pr == nil {
				pr = &partitionResult{Offsets: []int64{}}
				out.Partitions[key] = pr
			}
			pr.Count++
			pr.Offsets = append(pr.Offsets, r.offset)
		}
		sort.Slice(out.Epochs, func(i, j int) bool { return out.Epochs[i] < out.Epochs[j] })
		return out
	}
	watchdog("produce", c.timeout, func(msg string) any { return summarize(msg) })

	ctx := context.Background()
	for i := 0; i < *count; i++ {
		rec := &kgo.Record{Value: []byte(fmt.Sprintf("seq-%06d", *start+i))}
		switch {
		case *spread > 0:
			rec.Partition = int32(i % *spread)
		case *partition >= 0:
			rec.Partition = int32(*partition)
		}
		idx := i
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			mu.Lock()
			results[idx] = result{true, err, r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch}
			mu.Unlock()
		})
		if *interval > 0 {
			time.Sleep(*interval)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		out := summarize(err.Error())
		return fail("produce", out, "flush: %v", err)
	}
	out := summarize("")
	if out.Error == "" && out.ErrorCount > 0 {
		out.Error = fmt.Sprintf("%d of %d records failed", out.ErrorCount, *count)
	}
	if out.Error != "" {
		return fail("produce", out, "%s (first errors: %v)", out.Error, out.Errors)
	}
	emit(out)
	return 0
}
