// franz-it: a small franz-go (kgo + kadm) driver for Sluice's integration tests.
//
// Every subcommand prints exactly one JSON object on stdout. On failure it still prints
// that object (with an "error" field when it got that far), writes a one-line explanation
// to stderr and exits non-zero: 1 for a failed operation, 2 for bad usage, 3 when the
// --timeout watchdog fired.
//
//	franz-it produce       --brokers B --topic T --count N [--partition P | --spread K]
//	franz-it consume-group --brokers B --group G --topic T --count N [--commit]
//	franz-it lag           --brokers B --group G
//	franz-it describe      --brokers B --group G
//	franz-it transact      --brokers B --group G --topic IN --out OUT --transactional-id X
//	                       [--count N] [--abort-every K]
//
// Every command also takes --sasl-mechanism/--sasl-user/--sasl-password and
// --tls-ca/--tls-cert/--tls-key (security.go) to reach SASL, TLS and mTLS listeners.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func usage() {
	fmt.Fprintln(os.Stderr, `usage: franz-it <command> [flags]
commands:
  produce        idempotent producer (acks=all) of values seq-000000.. 
  consume-group  classic-protocol group consumer
  lag            kadm group lag (committed offset, end offset, lag per partition)
  describe       kadm DescribeGroups (state, protocol, members, assignments)
  transact       GroupTransactSession consume-transform-produce (EOS)
run "franz-it <command> -h" for the flags of one command`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var code int
	switch cmd {
	case "produce":
		code = runProduce(args)
	case "consume-group":
		code = runConsumeGroup(args)
	case "lag":
		code = runLag(args)
	case "describe":
		code = runDescribe(args)
	case "transact":
		code = runTransact(args)
	case "-h", "--help", "help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "franz-it: unknown command %q\n", cmd)
		usage()
		code = 2
	}
	os.Exit(code)
}

// common holds the flags every command takes.
type common struct {
	brokers  string
	timeout  time.Duration
	logLevel string
	clientID string
	security security
}

func (c *common) register(fs *flag.FlagSet, defaultTimeout time.Duration) {
	fs.StringVar(&c.brokers, "brokers", "", "comma-separated seed brokers (required)")
	fs.DurationVar(&c.timeout, "timeout", defaultTimeout, "hard deadline for the whole command")
	fs.StringVar(&c.logLevel, "log", "warn", "franz-go log level on stderr: none, error, warn, info, debug")
	fs.StringVar(&c.clientID, "client-id", "", "client.id (default: franz-go's)")
	c.security.register(fs)
}

// parse parses args and checks the required flags; it exits with 2 on bad usage.
func parse(fs *flag.FlagSet, args []string, required map[string]*string) {
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "franz-it %s: unexpected arguments %v\n", fs.Name(), fs.Args())
		os.Exit(2)
	}
	for name, v := range required {
		if *v == "" {
			fmt.Fprintf(os.Stderr, "franz-it %s: --%s is required\n", fs.Name(), name)
			os.Exit(2)
		}
	}
}

func (c *common) opts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(c.brokers, ",")...)}
	opts = append(opts, c.security.opts()...)
	if c.clientID != "" {
		opts = append(opts, kgo.ClientID(c.clientID))
	}
	var lvl kgo.LogLevel
	switch c.logLevel {
	case "none":
		lvl = kgo.LogLevelNone
	case "error":
		lvl = kgo.LogLevelError
	case "warn":
		lvl = kgo.LogLevelWarn
	case "info":
		lvl = kgo.LogLevelInfo
	case "debug":
		lvl = kgo.LogLevelDebug
	default:
		fmt.Fprintf(os.Stderr, "franz-it: unknown --log level %q\n", c.logLevel)
		os.Exit(2)
	}
	if lvl != kgo.LogLevelNone {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, lvl, func() string {
			return time.Now().Format("15:04:05.000 ")
		})))
	}
	return opts
}

// output prints the command's one JSON object exactly once, even when the watchdog and
// the command race to finish.
var (
	outputOnce sync.Once
	outputMu   sync.Mutex
)

func emit(v any) {
	outputOnce.Do(func() {
		outputMu.Lock()
		defer outputMu.Unlock()
		b, err := json.Marshal(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "franz-it: cannot encode output: %v\n", err)
			b = []byte(`{"error":"cannot encode output"}`)
		}
		os.Stdout.Write(append(b, '\n'))
	})
}

// fail prints the JSON object (v, with its error already set), a message on stderr, and
// returns exit code 1.
func fail(cmd string, v any, format string, a ...any) int {
	msg := fmt.Sprintf(format, a...)
	fmt.Fprintf(os.Stderr, "franz-it %s: FAILED: %s\n", cmd, msg)
	emit(v)
	return 1
}

// watchdog exits the process with code 3 after d, printing what snapshot returns. franz-go
// deliberately never abandons an in-flight idempotent batch, so a context deadline alone
// cannot bound a producer talking to a broker that never answers.
func watchdog(cmd string, d time.Duration, snapshot func(msg string) any) {
	go func() {
		time.Sleep(d)
		msg := fmt.Sprintf("timed out after %s", d)
		fmt.Fprintf(os.Stderr, "franz-it %s: FAILED: %s\n", cmd, msg)
		emit(snapshot(msg))
		os.Exit(3)
	}()
}
