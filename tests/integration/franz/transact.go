package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type transactOutput struct {
	Group           string `json:"group"`
	TransactionalID string `json:"transactional_id"`
	// Transactions that committed / aborted (asked to, or aborted by the session because
	// of a rebalance or a failed offset commit).
	Committed int `json:"committed"`
	Aborted   int `json:"aborted"`
	// Input records whose transaction committed.
	Records   int     `json:"records"`
	StoppedBy string  `json:"stopped_by"` // "count", "signal" or "error"
	ElapsedS  float64 `json:"elapsed_s"`
	Error     string  `json:"error,omitempty"`
}

// runTransact is consume-transform-produce with kgo.GroupTransactSession (EOS, KIP-447):
// every poll's records are copied to --out as "out-<value>" in one transaction that also
// commits the group's offsets; every --abort-every'th transaction is aborted on purpose
// (the session then rewinds to the committed offsets, so those records come again).
func runTransact(args []string) int {
	fs := flag.NewFlagSet("transact", flag.ContinueOnError)
	var c common
	c.register(fs, 120*time.Second)
	group := fs.String("group", "", "group id (required)")
	topic := fs.String("topic", "", "input topic (required)")
	out := fs.String("out", "", "output topic (required)")
	txnID := fs.String("transactional-id", "", "transactional id (required)")
	count := fs.Int("count", 0, "stop once this many input records committed (0: run until SIGTERM/SIGINT)")
	abortEvery := fs.Int("abort-every", 0, "abort every Nth transaction on purpose (0: never)")
	session := fs.Duration("session-timeout", 6*time.Second, "session timeout")
	heartbeat := fs.Duration("heartbeat", 500*time.Millisecond, "heartbeat interval")
	parse(fs, args, map[string]*string{"brokers": &c.brokers, "group": group, "topic": topic,
		"out": out, "transactional-id": txnID})

	var mu sync.Mutex
	res := transactOutput{Group: *group, TransactionalID: *txnID}
	began := time.Now()
	snapshot := func(errMsg string) any {
		mu.Lock()
		defer mu.Unlock()
		o := res
		o.ElapsedS = time.Since(began).Seconds()
		if errMsg != "" {
			o.Error, o.StoppedBy = errMsg, "error"
		}
		return o
	}
	watchdog("transact", c.timeout, snapshot)

	opts := append(c.opts(),
		kgo.TransactionalID(*txnID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(*session),
		kgo.HeartbeatInterval(*heartbeat),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fail("transact", snapshot(err.Error()), "session: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	stoppedBy := ""
	var loopErr error
	txns := 0
	for stoppedBy == "" && loopErr == nil {
		fetches := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			stoppedBy = "signal"
			break
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, kgo.ErrClientClosed) {
				continue
			}
			loopErr = fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		if loopErr != nil || fetches.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			loopErr = fmt.Errorf("begin: %w", err)
			break
		}
		txns++
		var produceErr error
		var perr sync.Mutex
		fetches.EachRecord(func(r *kgo.Record) {
			rec := &kgo.Record{Topic: *out, Value: append([]byte("out-"), r.Value...)}
			sess.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				if err != nil {
					perr.Lock()
					produceErr = err
					perr.Unlock()
				}
			})
		})
		want := kgo.TryCommit
		if *abortEvery > 0 && txns%*abortEvery == 0 {
			want = kgo.TryAbort
		}
		// A fresh context: a signal arriving mid-transaction must not cut End short.
		ectx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		committed, err := sess.End(ectx, want)
		cancel()
		if err != nil {
			loopErr = fmt.Errorf("end: %w", err)
			break
		}
		perr.Lock()
		if committed && produceErr != nil {
			loopErr = fmt.Errorf("committed a transaction whose produce failed: %w", produceErr)
		}
		perr.Unlock()
		mu.Lock()
		if committed {
			res.Committed++
			res.Records += fetches.NumRecords()
		} else {
			res.Aborted++
		}
		if *count > 0 && res.Records >= *count {
			stoppedBy = "count"
		}
		mu.Unlock()
	}
	mu.Lock()
	res.StoppedBy = stoppedBy
	mu.Unlock()
	final := snapshot("")
	sess.Close()
	if loopErr != nil {
		o := final.(transactOutput)
		o.Error, o.StoppedBy = loopErr.Error(), "error"
		return fail("transact", o, "%v", loopErr)
	}
	emit(final)
	return 0
}
